package front

import (
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// While keepPreemption runs, a goroutine that spins is preempted within
// tens of milliseconds even when it began with the runtime's monitor
// asleep and no system call since to wake it: the process went idle (a
// wait on a pipe, made without a system call as the sockets' raw calls
// are), then woke on the pipe's data, as a front does on a request.
// Without it the spinner would hold the only P until it stopped itself.
func TestKeepPreemptionBoundsASpinnersRun(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	stop := keepPreemption()
	defer stop()

	cmd := exec.Command("sh", "-c", "sleep 0.3; echo x")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	rc, err := out.(*os.File).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the pipe to be readable without reading it.
	first := true
	if err := rc.Read(func(uintptr) bool {
		if first {
			first = false
			return false
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}

	const limit = 2 * time.Second
	var quit atomic.Bool
	start := time.Now()
	go func() {
		for !quit.Load() && time.Since(start) < limit {
		}
	}()
	runtime.Gosched() // the spinner runs; this goroutine waits for the P
	waited := time.Since(start)
	quit.Store(true)
	if waited > limit/4 {
		t.Fatalf("a spinning goroutine held the only P for %v", waited)
	}
}
