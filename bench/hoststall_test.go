package main

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestStallsSeesASleep: a stop of the spinning loop (here the test's own
// sleep, inside the window, from another goroutine holding the only P)
// is counted as a stall.
func TestStallsSeesASleep(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(20 * time.Millisecond)
		// Holds the one P for 5 ms: the spinning goroutine is stopped
		// when the runtime preempts it for this one.
		end := time.Now().Add(5 * time.Millisecond)
		for time.Now().Before(end) {
		}
	}()
	longest, over1ms, lost := stalls(200 * time.Millisecond)
	<-done
	if longest < time.Millisecond || over1ms < 1 || lost < longest {
		t.Errorf("longest %v, %d over 1ms, lost %v: the 5 ms stop was not seen", longest, over1ms, lost)
	}
}

func TestDescribeStalls(t *testing.T) {
	got := describeStalls([]stallReport{
		{CPU: 1, Role: "server", Max: "1.2ms", Over1ms: 2, LostPct: 0.5},
		{CPU: 0, Role: "load generator", Error: "pin to CPU 0: invalid argument"},
	})
	for _, want := range []string{"server CPU 1: longest 1.2ms, 2 over 1ms, 0.50% of the time in stops over 100µs", "load generator CPU 0: not measured (pin to CPU 0: invalid argument)"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}
