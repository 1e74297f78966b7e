package main

import (
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// spinOn runs stalls for d on a thread pinned to cpu at the given nice.
// The thread is locked and never unlocked, so the runtime ends it with
// the goroutine: its affinity and priority go with it.
func spinOn(cpu, nice int, d time.Duration) (longest time.Duration, over1ms int, lost time.Duration, err error) {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return 0, 0, 0, fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	if nice != 0 {
		if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), nice); err != nil {
			return 0, 0, 0, fmt.Errorf("nice %d: %w", nice, err)
		}
	}
	longest, over1ms, lost = stalls(d)
	return longest, over1ms, lost, nil
}
