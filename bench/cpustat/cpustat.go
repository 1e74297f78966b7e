// Package cpustat reads the CPU time counters of /proc: one CPU's jiffies
// from /proc/stat (what the benchmark measures: the pinned server CPU, whoever
// spent it) and a process group's from /proc/<pid>/stat (a cross-check
// that other processes on that CPU did not inflate the figure); and, for
// the memory figures, a process group's resident memory.
package cpustat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// CPUTimes is one "cpuN" line of /proc/stat, in USER_HZ ticks (jiffies).
// Guest time is already included in User and Nice by the kernel, so it is
// not kept.
type CPUTimes struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal uint64
}

// Busy is the time the CPU spent working: user, nice, system, irq and
// softirq. Softirq matters on loopback: part of the TCP work of a request
// is accounted there, not to the process.
func (t CPUTimes) Busy() uint64 { return t.User + t.Nice + t.System + t.IRQ + t.SoftIRQ }

// Total is every tick of the CPU, idle and iowait included.
func (t CPUTimes) Total() uint64 {
	return t.User + t.Nice + t.System + t.Idle + t.IOWait + t.IRQ + t.SoftIRQ + t.Steal
}

// Sub returns the ticks spent between an earlier reading and t.
func (t CPUTimes) Sub(earlier CPUTimes) CPUTimes {
	return CPUTimes{
		User: t.User - earlier.User, Nice: t.Nice - earlier.Nice, System: t.System - earlier.System,
		Idle: t.Idle - earlier.Idle, IOWait: t.IOWait - earlier.IOWait, IRQ: t.IRQ - earlier.IRQ,
		SoftIRQ: t.SoftIRQ - earlier.SoftIRQ, Steal: t.Steal - earlier.Steal,
	}
}

// ParseStat finds the line of one CPU ("cpu1 ...") in the contents of
// /proc/stat. Kernels before 2.6.11 had fewer columns; missing ones read 0.
func ParseStat(data []byte, cpu int) (CPUTimes, error) {
	want := "cpu" + strconv.Itoa(cpu)
	for line := range bytes.SplitSeq(data, []byte{'\n'}) {
		f := strings.Fields(string(line))
		if len(f) < 5 || f[0] != want {
			continue
		}
		var v [8]uint64
		for i := 0; i < len(v) && i+1 < len(f); i++ {
			n, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return CPUTimes{}, fmt.Errorf("/proc/stat %s column %d: %w", want, i+1, err)
			}
			v[i] = n
		}
		return CPUTimes{User: v[0], Nice: v[1], System: v[2], Idle: v[3], IOWait: v[4], IRQ: v[5], SoftIRQ: v[6], Steal: v[7]}, nil
	}
	return CPUTimes{}, fmt.Errorf("/proc/stat: no line for %s", want)
}

// ReadStat reads one CPU's counters from /proc/stat.
func ReadStat(cpu int) (CPUTimes, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTimes{}, err
	}
	return ParseStat(data, cpu)
}

// ProcTimes is what the bench needs of one /proc/<pid>/stat line.
type ProcTimes struct {
	PGrp         int
	UTime, STime uint64 // jiffies, all threads of the process
	// MinFlt is the page faults the process took that needed no read
	// from disk: on a growing heap, each is a page touched for the first
	// time, which the kernel (and, in a VM, the host) has to back.
	MinFlt uint64
}

// ParseProcStat reads a /proc/<pid>/stat line. The command name (field 2)
// is in parentheses and may hold spaces and parentheses itself, so fields
// are counted from the last ')'.
func ParseProcStat(data []byte) (ProcTimes, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return ProcTimes{}, errors.New("proc stat: no command field")
	}
	// After ")": state(3) ppid(4) pgrp(5) session(6) tty(7) tpgid(8)
	// flags(9) minflt(10) cminflt(11) majflt(12) cmajflt(13) utime(14)
	// stime(15): index k here is field k+3.
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return ProcTimes{}, fmt.Errorf("proc stat: %d fields after the command, want at least 13", len(f))
	}
	pgrp, err1 := strconv.Atoi(f[2])
	minflt, err2 := strconv.ParseUint(f[7], 10, 64)
	ut, err3 := strconv.ParseUint(f[11], 10, 64)
	st, err4 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return ProcTimes{}, fmt.Errorf("proc stat: %w", err)
	}
	return ProcTimes{PGrp: pgrp, UTime: ut, STime: st, MinFlt: minflt}, nil
}

// Usage is what a process group has used so far: CPU ticks (user and
// system) and minor page faults.
type Usage struct {
	Jiffies, MinorFaults uint64
}

// Sub returns what was used between an earlier reading and u.
func (u Usage) Sub(earlier Usage) Usage {
	return Usage{Jiffies: u.Jiffies - earlier.Jiffies, MinorFaults: u.MinorFaults - earlier.MinorFaults}
}

// GroupUsage sums Usage over the live processes of a process group (a
// server and the workers it forked, as nginx does). Processes that exit
// in between take their ticks with them; servers under test do not fork
// per request.
func GroupUsage(pgid int) (Usage, error) {
	var u Usage
	err := eachInGroup(pgid, func(dir string, pt ProcTimes) {
		u.Jiffies += pt.UTime + pt.STime
		u.MinorFaults += pt.MinFlt
	})
	return u, err
}

// eachInGroup calls f with the /proc directory and stat line of every
// live process of group pgid.
func eachInGroup(pgid int, f func(dir string, pt ProcTimes)) error {
	paths, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return err
	}
	found := false
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue // the process went between the glob and the read
		}
		pt, err := ParseProcStat(data)
		if err != nil || pt.PGrp != pgid {
			continue
		}
		found = true
		f(filepath.Dir(p), pt)
	}
	if !found {
		return fmt.Errorf("no process in group %d", pgid)
	}
	return nil
}

// ClockTicks returns USER_HZ, the unit of every figure above, from
// `getconf CLK_TCK`; ok is false when it had to assume 100 (the value on
// every mainstream Linux architecture).
func ClockTicks() (hz int, ok bool) {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && n > 0 {
			return n, true
		}
	}
	return 100, false
}
