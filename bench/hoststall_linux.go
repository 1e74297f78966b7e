package main

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// spinOn runs stalls for d on this goroutine's thread, pinned to cpu at
// the given nice, then gives the thread back as it found it. The thread
// must not end with the goroutine (a locked thread left locked would):
// the servers and legacysim are started with Pdeathsig (proc_linux.go),
// which the kernel sends when the thread that started them ends, not
// the process.
func spinOn(cpu, nice int, d time.Duration) (longest time.Duration, over1ms int, lost time.Duration, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var was unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		return 0, 0, 0, fmt.Errorf("read the thread's CPUs: %w", err)
	}
	tid := unix.Gettid()
	// getpriority(2) returns 20 - nice, so that it is never negative.
	raw, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("read the thread's nice: %w", err)
	}
	wasNice := 20 - raw
	defer func() {
		err = errors.Join(err, unix.SchedSetaffinity(0, &was), unix.Setpriority(unix.PRIO_PROCESS, tid, wasNice))
	}()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return 0, 0, 0, fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	if nice != wasNice {
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, nice); err != nil {
			return 0, 0, 0, fmt.Errorf("nice %d: %w", nice, err)
		}
	}
	longest, over1ms, lost = stalls(d)
	return longest, over1ms, lost, nil
}
