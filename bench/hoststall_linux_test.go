package main

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSpinOnGivesTheThreadBack: after the probe, the thread it ran on has
// its CPUs and nice again, and lives on (a child started from it would
// be killed with it: Pdeathsig).
func TestSpinOnGivesTheThreadBack(t *testing.T) {
	runtime.LockOSThread() // the probe's own lock nests inside this one
	defer runtime.UnlockOSThread()
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	tid := unix.Gettid()
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		t.Fatal(err)
	}
	cpu := -1
	for i := range 1024 {
		if before.IsSet(i) {
			cpu = i
			break
		}
	}
	// A nice one above the thread's: allowed without privileges.
	longest, _, lost, err := spinOn(cpu, 20-prio+1, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if lost < 0 || longest < 0 {
		t.Fatalf("longest %v, lost %v", longest, lost)
	}
	var after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("CPUs %v after the probe, %v before", after, before)
	}
	if got, err := unix.Getpriority(unix.PRIO_PROCESS, tid); err != nil || got != prio {
		t.Errorf("priority %d (%v) after the probe, %d before", got, err, prio)
	}
	if unix.Gettid() != tid {
		t.Errorf("the goroutine left its thread")
	}
}
