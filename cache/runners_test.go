package cache

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"tradergate/internal/testkit"
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
	// The flight lands (from a deferred call) before the exiting runner
	// gives back its count, so the leader may return first.
	testkit.Eventually(t, "the exited runner no longer counted", func() bool { return c.Stats().Runners == 0 })
	var n atomic.Int64
	mustGet(t, c, "y", counting(&n, "{}", liveFacts), Miss)
	if got := c.Stats().Runners; got != 1 {
		t.Fatalf("%d runners after the next miss, want 1", got)
	}
}

// inlineKey marks the contexts whose callers lead their flights inline in
// the tests below (the proxy's mark is wire.Shared).
type inlineKey struct{}

func inlineCtx(ctx context.Context) context.Context {
	return context.WithValue(ctx, inlineKey{}, true)
}

func markedInline(ctx context.Context) bool { return ctx.Value(inlineKey{}) != nil }

// TestInlineFlight: a leader under a context Options.Inline accepts runs
// its flight itself, no runner started, and a caller that joins it gets
// its page; a leader under another context still hands its flight over.
func TestInlineFlight(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{Inline: markedInline})
	entered, release := make(chan struct{}), make(chan struct{})
	slow := func(context.Context, func() bool) ([]byte, Facts, error) {
		close(entered)
		<-release
		return []byte("p"), liveFacts, nil
	}
	led := make(chan error, 1)
	go func() {
		_, st, err := c.get(inlineCtx(context.Background()), "k", slow)
		if err == nil && st != Miss {
			err = fmt.Errorf("status %v", st)
		}
		led <- err
	}()
	<-entered
	if got := c.Stats().Runners; got != 0 {
		t.Fatalf("%d runners during an inline flight", got)
	}
	joined := make(chan *Entry, 1)
	go func() {
		e, _, _ := c.get(context.Background(), "k", slow)
		joined <- e
	}()
	<-waiting(2, c)
	close(release)
	if err := <-led; err != nil {
		t.Fatalf("the leader: %v", err)
	}
	if e := <-joined; body(e) != "p" {
		t.Fatalf("the caller that joined: %q", body(e))
	}
	var n atomic.Int64
	mustGet(t, c, "other", counting(&n, "{}", liveFacts), Miss)
	if got := c.Stats().Runners; got != 1 {
		t.Fatalf("%d runners after a miss not marked inline, want 1", got)
	}
}

// TestInlineFlightLeaderStops: the leader's context ends while its inline
// flight fetches: the fetch is cancelled, the leader gets its context's
// error, and a caller that joined gets the context's cause (the end of
// the edge), not a cancellation that would read as its own client gone;
// nothing is stored.
func TestInlineFlightLeaderStops(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{Inline: markedInline})
	stopping := errors.New("the edge stops")
	ctx, stop := context.WithCancelCause(context.Background())
	entered := make(chan struct{})
	hang := func(ctx context.Context, _ func() bool) ([]byte, Facts, error) {
		close(entered)
		<-ctx.Done()
		return nil, Facts{}, ctx.Err()
	}
	led := make(chan error, 1)
	go func() {
		_, _, err := c.get(inlineCtx(ctx), "k", hang)
		led <- err
	}()
	<-entered
	joined := make(chan error, 1)
	go func() {
		_, _, err := c.get(context.Background(), "k", hang)
		joined <- err
	}()
	<-waiting(2, c)
	stop(stopping)
	if err := <-led; err != context.Canceled {
		t.Fatalf("the leader: %v, want its context's error", err)
	}
	if err := <-joined; !errors.Is(err, stopping) || errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that joined: %v, want the leader's cause", err)
	}
	var n atomic.Int64
	mustGet(t, c, "k", counting(&n, "{}", liveFacts), Miss)
}

// TestInlineNotWithAHeldPage: a leader that holds a page to serve at
// stale_after must be free to leave its flight, so it hands it to a
// runner even under a context marked inline.
func TestInlineNotWithAHeldPage(t *testing.T) {
	clk := newClock()
	c := newTestCache(t, Config{StaleAfter: 20 * time.Millisecond, Policy: Policy{StaleWhileRevalidate: -1}}, clk,
		Options{Inline: func(context.Context) bool { return true }})
	var n atomic.Int64
	mustGet(t, c, "k", versions(&n, liveFacts), Miss)
	clk.Advance(2 * time.Second) // past the TTL, inside stale_if_error
	release := make(chan struct{})
	defer close(release)
	slow := func(context.Context, func() bool) ([]byte, Facts, error) {
		<-release
		return []byte("v2"), liveFacts, nil
	}
	if e := mustGet(t, c, "k", slow, Stale); body(e) != "v1" {
		t.Fatalf("after stale_after: %q", body(e))
	}
	if got := c.Stats().Runners; got != 1 {
		t.Fatalf("%d runners, want the held page's flight on one", got)
	}
}
