package cache

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunnersKept: misses one after another fly on one kept runner, which
// ends once it has waited its idle time for another flight; a flight that
// panics leaves its runner running the next.
func TestRunnersKept(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{})
	c.runnerIdle = 200 * time.Millisecond
	var n atomic.Int64
	for _, key := range []string{"a", "b", "c", "d"} {
		// A caller returns once its flight is done, a moment before the
		// runner waits for the next one; a miss in that moment starts a
		// second runner. The pause lets the runner park first.
		time.Sleep(20 * time.Millisecond)
		mustGet(t, c, key, counting(&n, "{}", liveFacts), Miss)
		if got := c.Stats().Runners; got != 1 {
			t.Fatalf("after the miss of %q: %d runners, want 1", key, got)
		}
	}
	if _, _, err := c.get(context.Background(), "p", func(context.Context, func() bool) ([]byte, Facts, error) { panic("boom") }); err == nil {
		t.Fatal("no error from a panicking fetch")
	}
	time.Sleep(20 * time.Millisecond)
	mustGet(t, c, "e", counting(&n, "{}", liveFacts), Miss)
	if got := c.Stats().Runners; got != 1 || n.Load() != 5 {
		t.Fatalf("after a panic and a miss: %d runners, %d fetches; want 1 and 5", got, n.Load())
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Stats().Runners != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d runners left 5s after the last flight", c.Stats().Runners)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRunnersBurst: concurrent misses start a runner each, at most one per
// flight running at once, and Close ends them without waiting for their
// idle time.
func TestRunnersBurst(t *testing.T) {
	c, err := New(Config{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const flights = 8
	release := make(chan struct{})
	done := make(chan error, flights)
	for i := range flights {
		go func() {
			_, _, err := c.get(context.Background(), string(rune('a'+i)), func(context.Context, func() bool) ([]byte, Facts, error) {
				<-release
				return []byte("{}"), liveFacts, nil
			})
			done <- err
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Stats().Runners != flights {
		if time.Now().After(deadline) {
			t.Fatalf("%d runners for %d flights blocked at once", c.Stats().Runners, flights)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	for range flights {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Stats().Runners; got > flights {
		t.Fatalf("%d runners after %d flights", got, flights)
	}
	start := time.Now()
	c.Close() // goleak (TestMain) finds any runner left
	if took := time.Since(start); took >= runnerIdle {
		t.Fatalf("Close took %v: it waited for the runners' idle time", took)
	}
	if got := c.stats.runners.Load(); got != 0 {
		t.Fatalf("%d runners after Close", got)
	}
}

// TestRunnerGoexit: a fetch that ends its goroutine fails its flight with
// errFlightExited rather than leaving its callers waiting, and takes its
// runner with it; the next miss starts another.
func TestRunnerGoexit(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{})
	_, _, err := c.get(context.Background(), "x", func(context.Context, func() bool) ([]byte, Facts, error) {
		runtime.Goexit()
		return nil, Facts{}, nil
	})
	if !errors.Is(err, errFlightExited) {
		t.Fatalf("error %v, want errFlightExited", err)
	}
	var n atomic.Int64
	mustGet(t, c, "y", counting(&n, "{}", liveFacts), Miss)
	if got := c.Stats().Runners; got != 1 {
		t.Fatalf("%d runners after the next miss, want 1", got)
	}
}
