package cpustat

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Memory is a process's (or a group's, summed) resident memory in bytes:
// RSS now and its peak (VmRSS and VmHWM of /proc/<pid>/status).
type Memory struct {
	RSS, Peak uint64
}

// ParseStatus reads VmRSS and VmHWM from a /proc/<pid>/status file. A
// kernel thread or a zombie has neither; it reads as zero.
func ParseStatus(data []byte) (Memory, error) {
	var m Memory
	for line := range bytes.Lines(data) {
		var dst *uint64
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			dst = &m.RSS
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			dst = &m.Peak
		default:
			continue
		}
		// "VmRSS:\t  123456 kB"
		f := bytes.Fields(line)
		if len(f) != 3 || string(f[2]) != "kB" {
			return Memory{}, fmt.Errorf("proc status: unexpected line %q", bytes.TrimSpace(line))
		}
		kb, err := strconv.ParseUint(string(f[1]), 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("proc status: %w", err)
		}
		*dst = kb << 10
	}
	return m, nil
}

// GroupMemory sums the resident memory of the live processes of a process
// group (nginx's master and worker; a Go server alone).
func GroupMemory(pgid int) (Memory, error) {
	var sum Memory
	var firstErr error
	err := eachInGroup(pgid, func(dir string, _ ProcTimes) {
		data, err := os.ReadFile(filepath.Join(dir, "status"))
		if err != nil {
			return // gone since its stat was read
		}
		m, err := ParseStatus(data)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		sum.RSS += m.RSS
		sum.Peak += m.Peak
	})
	if err == nil {
		err = firstErr
	}
	return sum, err
}
