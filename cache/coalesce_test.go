package cache

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"tradergate/internal/testkit"
)

// TestCoalesce: 100 goroutines on one cold key make exactly one fetch
// (groupcache TestDoDupSuppress). The fetch blocks until all 100 wait on its
// flight, so none can come late and find the stored entry instead.
func TestCoalesce(t *testing.T) {
	const n = 100
	c := newTestCache(t, Config{}, newClock(), Options{})
	all := waiting(n, c)
	var fetches atomic.Int64
	fetch := func(context.Context, func() bool) ([]byte, Facts, error) {
		fetches.Add(1)
		<-all
		return []byte(`{"data":1}`), liveFacts, nil
	}
	var wg sync.WaitGroup
	entries := make([]*Entry, n)
	for i := range n {
		wg.Go(func() {
			e, st, err := c.get(context.Background(), "k", fetch)
			if err != nil || st != Miss {
				t.Errorf("Get: %v, %v", st, err)
			}
			entries[i] = e
		})
	}
	wg.Wait()
	if got := fetches.Load(); got != 1 {
		t.Fatalf("fetches = %d, want 1", got)
	}
	for _, e := range entries {
		if e != entries[0] {
			t.Fatal("callers got different entries")
		}
	}
	s := c.Stats()
	if s.Coalesced != n-1 || s.Misses != n || s.Fetches != 1 || s.Waiting != 0 {
		t.Errorf("stats %+v: want coalesced %d, misses %d, fetches 1, waiting 0", s, n-1, n)
	}
	mustGet(t, c, "k", fetch, Hit)
}

type ctxKey struct{}

// TestCoalesceCancelledWaiter: a waiter whose ctx ends returns ctx.Err() at
// once, even the one that started the flight; the fetch goes on with a ctx
// that is not cancelled but still carries the starter's values, and the
// other waiters get the page.
func TestCoalesceCancelledWaiter(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{})
	first, all := waiting(1, c), waiting(3, c)
	release := make(chan struct{})
	type seen struct {
		err error
		val any
	}
	seenCh := make(chan seen, 1)
	var fetches atomic.Int64
	fetch := func(ctx context.Context, _ func() bool) ([]byte, Facts, error) {
		fetches.Add(1)
		<-release
		seenCh <- seen{ctx.Err(), ctx.Value(ctxKey{})}
		return []byte("page"), liveFacts, nil
	}

	leaderCtx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "req-1"))
	leaderErr := make(chan error, 1)
	go func() {
		_, _, err := c.get(leaderCtx, "k", fetch)
		leaderErr <- err
	}()
	<-first // the leader's flight runs
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			e, st, err := c.get(context.Background(), "k", fetch)
			if err != nil || st != Miss || string(e.Body()) != "page" {
				t.Errorf("other waiter: %v %v", st, err)
			}
		})
	}
	<-all
	cancel()
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled leader got %v, want context.Canceled", err)
	}
	close(release) // only now: the leader returned while the fetch was blocked
	wg.Wait()
	got := <-seenCh
	if got.err != nil {
		t.Errorf("fetch ctx cancelled by a waiter: %v", got.err)
	}
	if got.val != "req-1" {
		t.Errorf("fetch ctx lost the leader's values: %v", got.val)
	}
	if fetches.Load() != 1 {
		t.Errorf("fetches = %d, want 1", fetches.Load())
	}
	mustGet(t, c, "k", fetch, Hit) // the abandoned flight still stored the page
}

// TestFlightContext: a flight on a runner runs under a context with its
// leader's values but not its deadline, which ends with Close; and a
// context the fetch derives from it (the upstream call's timeout) is
// registered with the cache's own end. The context package would start a
// goroutine to watch each derived context whose parent's cancellation it
// cannot find.
func TestFlightContext(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{})
	leader, cancel := context.WithTimeout(context.WithValue(context.Background(), ctxKey{}, "req-1"), time.Hour)
	defer cancel()
	const derived = 100
	type seen struct {
		deadline bool
		val      any
		watchers int
		err      error
	}
	seenCh, entered := make(chan seen, 1), make(chan struct{})
	fetch := func(ctx context.Context, _ func() bool) ([]byte, Facts, error) {
		_, deadline := ctx.Deadline()
		before := runtime.NumGoroutine()
		var cancels [derived]context.CancelFunc
		for i := range cancels {
			_, cancels[i] = context.WithTimeout(ctx, time.Hour)
		}
		watchers := runtime.NumGoroutine() - before
		for _, cancel := range cancels {
			cancel()
		}
		close(entered)
		<-ctx.Done()
		seenCh <- seen{deadline, ctx.Value(ctxKey{}), watchers, ctx.Err()}
		return nil, Facts{}, ctx.Err()
	}
	errc := make(chan error, 1)
	go func() {
		_, _, err := c.get(leader, "k", fetch)
		errc <- err
	}()
	<-entered
	c.Close()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("the leader: %v, want the cancellation of Close", err)
	}
	got := <-seenCh
	if got.deadline {
		t.Error("the flight's context has the leader's deadline")
	}
	if got.val != "req-1" {
		t.Errorf("the flight's context lost the leader's values: %v", got.val)
	}
	if got.err != context.Canceled {
		t.Errorf("the flight's context ended with %v, want Close's cancellation", got.err)
	}
	// Other goroutines may start meanwhile; one per derived context would
	// be all of them.
	if got.watchers >= derived/2 {
		t.Errorf("%d goroutines started for %d contexts derived from the flight's", got.watchers, derived)
	}
}

// TestCancelledBeforeGet: a caller already gone starts no fetch.
func TestCancelledBeforeGet(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var fetches atomic.Int64
	if _, _, err := c.get(ctx, "k", counting(&fetches, "x", liveFacts)); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if fetches.Load() != 0 {
		t.Error("fetched for a cancelled caller")
	}
}

// With a tracer, every caller that joined another's flight records its
// wait; the one whose flight ran records none.
func TestCoalescedWaitSpans(t *testing.T) {
	const n = 5
	rec := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
	c := newTestCache(t, Config{}, newClock(), Options{Tracer: tracer})
	all := waiting(n, c)
	fetch := func(context.Context, func() bool) ([]byte, Facts, error) {
		<-all
		return []byte(`{"data":1}`), liveFacts, nil
	}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, _, err := c.get(context.Background(), "k", fetch); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	waits := 0
	for _, s := range rec.Ended() {
		if s.Name() == "cache.coalesced_wait" {
			waits++
		}
	}
	if waits != n-1 {
		t.Errorf("%d wait spans for %d callers of one flight, want %d", waits, n, n-1)
	}
}

// TestFlightGoroutines: a flight costs one goroutine, its runner, however
// many callers wait on it: the caller that leads it hands it to the runner
// itself, and the others wait on the flight.
func TestFlightGoroutines(t *testing.T) {
	const n = 10
	c := newTestCache(t, Config{}, newClock(), Options{})
	release := make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	t.Cleanup(free) // before the cache's Close, which waits for the flight
	fetch := func(context.Context, func() bool) ([]byte, Facts, error) {
		<-release
		return []byte("page"), liveFacts, nil
	}
	base := flightGoroutines()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, _, err := c.get(context.Background(), "k", fetch); err != nil {
				t.Error(err)
			}
		})
	}
	<-waiting(n, c)
	testkit.Eventually(t, "the callers and one runner", func() bool { return flightGoroutines()-base == n+1 })
	if s := c.Stats(); s.Runners != 1 {
		t.Errorf("%d runners, want 1", s.Runners)
	}
	free()
	wg.Wait()
}

// flightGoroutines counts the goroutines inside a method of this
// package's types: a caller in Get, a runner, anything a flight starts;
// not a store's settler, which lives as long as its store, and a closed
// store's may still be leaving when the next test begins.
func flightGoroutines() int {
	count := 0
	for _, g := range testkit.Goroutines() {
		if strings.Contains(g, "tradergate/cache.(*store).settle(") {
			continue
		}
		for line := range strings.SplitSeq(g, "\n") {
			// Frames start at the line's start; "created by" lines and
			// file lines do not.
			if strings.HasPrefix(line, "tradergate/cache.(*") {
				count++
				break
			}
		}
	}
	return count
}
