package cache

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"tradergate/cache/fetcherr"
	"tradergate/normalize"
)

// versions returns a Fetch whose n-th call answers "v<n>".
func versions(n *atomic.Int64, facts Facts) Fetch {
	return func(context.Context, func() bool) ([]byte, Facts, error) {
		return fmt.Appendf(nil, "v%d", n.Add(1)), facts, nil
	}
}

func body(e *Entry) string {
	if e == nil {
		return "<nil>"
	}
	return string(e.Body())
}

// TestFreshness walks one key through its life on the injected clock:
// fresh, stale while one refresh runs, refreshed, and past every window.
func TestFreshness(t *testing.T) {
	clk := newClock()
	c := newTestCache(t, Config{}, clk, Options{}) // fresh 1s, swr 1s
	var n atomic.Int64
	fetch := versions(&n, liveFacts)

	t0 := clk.Now()
	e := mustGet(t, c, "k", fetch, Miss)
	if body(e) != "v1" || e.TTL != time.Second || e.Immutable || !e.Stored.Equal(t0) {
		t.Fatalf("entry %q ttl %v immutable %v stored %v", e.Body(), e.TTL, e.Immutable, e.Stored)
	}
	clk.Advance(time.Second - time.Nanosecond)
	if e := mustGet(t, c, "k", fetch, Hit); body(e) != "v1" || e.FreshFor(clk.Now()) != time.Nanosecond {
		t.Fatalf("hit %q fresh for %v", body(e), e.FreshFor(clk.Now()))
	}

	// Inside stale_while_revalidate: the old page, and one refresh however
	// many stale hits arrive while it runs.
	release := make(chan struct{})
	var refreshes atomic.Int64
	slow := func(ctx context.Context, _ func() bool) ([]byte, Facts, error) {
		refreshes.Add(1)
		<-release
		return []byte("v2"), liveFacts, nil
	}
	clk.Advance(500 * time.Millisecond)
	for range 10 {
		if e := mustGet(t, c, "k", slow, Stale); body(e) != "v1" || e.FreshFor(clk.Now()) != 0 {
			t.Fatalf("stale %q", body(e))
		}
	}
	close(release)
	c.wg.Wait() // the refresh is owned by the cache
	if refreshes.Load() != 1 {
		t.Fatalf("refreshes = %d, want 1", refreshes.Load())
	}
	e = mustGet(t, c, "k", fetch, Hit)
	if body(e) != "v2" || !e.Stored.Equal(clk.Now()) {
		t.Fatalf("after refresh: %q stored %v", body(e), e.Stored)
	}
	s := c.Stats()
	if s.Stale != 10 || s.Refreshes != 1 || s.Hits != 2 || s.Misses != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestChangeSeenAfterWindows: past TTL plus stale_while_revalidate a changed
// upstream answer is served.
// Fresh answers only what Get would answer as a Hit, starts nothing, and
// counts what it answers as a hit.
func TestFresh(t *testing.T) {
	clk := newClock()
	c := newTestCache(t, Config{}, clk, Options{}) // fresh 1s, swr 1s
	var n atomic.Int64
	if e := c.Fresh("k", clk.Now()); e != nil {
		t.Fatalf("Fresh before any Get: %q", body(e))
	}
	mustGet(t, c, "k", versions(&n, liveFacts), Miss)
	if e := c.Fresh("k", clk.Now().Add(time.Second-time.Nanosecond)); body(e) != "v1" {
		t.Fatalf("Fresh within the TTL: %q", body(e))
	}
	// Past the TTL Get would serve it stale and refresh it: Fresh leaves
	// both to Get.
	if e := c.Fresh("k", clk.Now().Add(time.Second)); e != nil {
		t.Fatalf("Fresh past the TTL: %q", body(e))
	}
	if st := c.Stats(); st.Hits != 1 || st.Fetches != 1 || st.Stale != 0 {
		t.Fatalf("stats %+v, want 1 hit and 1 fetch", st)
	}
}

func TestChangeSeenAfterWindows(t *testing.T) {
	clk := newClock()
	c := newTestCache(t, Config{Policy: Policy{FreshTTL: 2 * time.Second, StaleWhileRevalidate: time.Second}}, clk, Options{})
	var n atomic.Int64
	fetch := versions(&n, liveFacts)
	mustGet(t, c, "k", fetch, Miss)
	clk.Advance(3 * time.Second) // exactly TTL + SWR: still stale
	if e := mustGet(t, c, "k", func(context.Context, func() bool) ([]byte, Facts, error) {
		return nil, Facts{}, errors.New("refresh not wanted here")
	}, Stale); body(e) != "v1" {
		t.Fatalf("got %q", body(e))
	}
	c.wg.Wait()
	clk.Advance(time.Nanosecond)
	if e := mustGet(t, c, "k", fetch, Miss); body(e) != "v2" {
		t.Fatalf("after TTL+SWR got %q, want the changed answer v2", body(e))
	}
}

// TestRefreshSharesFlightWithMiss: a miss that arrives while the background
// refresh of its key runs waits on that same fetch (with stale_after off:
// on, it is answered the held page at once, TestStaleAfter).
func TestRefreshSharesFlightWithMiss(t *testing.T) {
	clk := newClock()
	c := newTestCache(t, Config{StaleAfter: -1}, clk, Options{})
	var n atomic.Int64
	mustGet(t, c, "k", versions(&n, liveFacts), Miss)

	started := make(chan struct{})
	release := make(chan struct{})
	var fetches atomic.Int64
	slow := func(context.Context, func() bool) ([]byte, Facts, error) {
		fetches.Add(1)
		close(started)
		<-release
		return []byte("v2"), liveFacts, nil
	}
	clk.Advance(1500 * time.Millisecond)
	mustGet(t, c, "k", slow, Stale) // starts the refresh
	<-started
	joined := waiting(1, c)
	clk.Advance(time.Second) // past the SWR window: a miss
	done := make(chan *Entry)
	go func() { done <- mustGet(t, c, "k", slow, Miss) }()
	<-joined
	close(release)
	if e := <-done; body(e) != "v2" {
		t.Fatalf("miss got %q", body(e))
	}
	c.wg.Wait()
	if fetches.Load() != 1 {
		t.Fatalf("fetches = %d, want 1 (refresh and miss share it)", fetches.Load())
	}
	if s := c.Stats(); s.Coalesced != 1 {
		t.Errorf("coalesced = %d, want 1", s.Coalesced)
	}
}

// errUpstream is the legacy host failing: a stale page may answer it.
var errUpstream = &fetcherr.Error{Reason: fetcherr.Failed, Err: errors.New("upstream 502")}

func failing(n *atomic.Int64, err error) Fetch {
	return func(context.Context, func() bool) ([]byte, Facts, error) {
		n.Add(1)
		return nil, Facts{}, err
	}
}

// TestStaleIfError: a failed fetch serves the held page while it is inside
// TTL + stale_if_error, and the error otherwise.
func TestStaleIfError(t *testing.T) {
	// The client's fault: never answered by a stale page.
	errClient := &fetcherr.Error{Reason: fetcherr.Refused, Status: 400, Message: "bad request"}
	cfg := Config{Policy: Policy{FreshTTL: time.Second, StaleWhileRevalidate: time.Second, StaleIfError: time.Minute}}

	t.Run("inside and beyond the window", func(t *testing.T) {
		clk := newClock()
		c := newTestCache(t, cfg, clk, Options{})
		var n, fails atomic.Int64
		mustGet(t, c, "k", versions(&n, liveFacts), Miss)
		clk.Advance(2*time.Second + time.Nanosecond) // past SWR: a miss, which fails
		if e := mustGet(t, c, "k", failing(&fails, errUpstream), Stale); body(e) != "v1" {
			t.Fatalf("got %q", body(e))
		}
		clk.Advance(time.Minute - time.Second - time.Nanosecond) // exactly TTL + SIE
		mustGet(t, c, "k", failing(&fails, errUpstream), Stale)
		clk.Advance(time.Nanosecond)
		if _, _, err := c.get(context.Background(), "k", failing(&fails, errUpstream)); !errors.Is(err, errUpstream) {
			t.Fatalf("beyond TTL+SIE: %v, want the error", err)
		}
		if fails.Load() != 3 {
			t.Errorf("fetches = %d, want 3 (errors are not cached)", fails.Load())
		}
		if s := c.Stats(); s.Stale != 2 {
			t.Errorf("stale = %d, want 2", s.Stale)
		}
	})
	t.Run("the client's fault", func(t *testing.T) {
		clk := newClock()
		c := newTestCache(t, cfg, clk, Options{})
		var n, fails atomic.Int64
		mustGet(t, c, "k", versions(&n, liveFacts), Miss)
		clk.Advance(5 * time.Second)
		if _, _, err := c.get(context.Background(), "k", failing(&fails, errClient)); !errors.Is(err, errClient) {
			t.Fatalf("got %v, want the client error", err)
		}
	})
	t.Run("nothing held", func(t *testing.T) {
		c := newTestCache(t, cfg, newClock(), Options{})
		var fails atomic.Int64
		if _, _, err := c.get(context.Background(), "k", failing(&fails, errUpstream)); !errors.Is(err, errUpstream) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("stale_if_error off", func(t *testing.T) {
		clk := newClock()
		c := newTestCache(t, Config{Policy: Policy{StaleIfError: -1}}, clk, Options{})
		var n, fails atomic.Int64
		mustGet(t, c, "k", versions(&n, liveFacts), Miss)
		clk.Advance(3 * time.Second)
		if _, _, err := c.get(context.Background(), "k", failing(&fails, errUpstream)); !errors.Is(err, errUpstream) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("failed refresh keeps the stale page", func(t *testing.T) {
		clk := newClock()
		c := newTestCache(t, cfg, clk, Options{})
		var n, fails atomic.Int64
		mustGet(t, c, "k", versions(&n, liveFacts), Miss)
		clk.Advance(1500 * time.Millisecond)
		mustGet(t, c, "k", failing(&fails, errUpstream), Stale)
		c.wg.Wait()
		// The refresh failed: the page is still held, and a later stale
		// hit may try again.
		mustGet(t, c, "k", failing(&fails, errUpstream), Stale)
		c.wg.Wait()
		if fails.Load() != 2 || c.Stats().Refreshes != 2 {
			t.Errorf("fetches %d, refreshes %d, want 2 and 2", fails.Load(), c.Stats().Refreshes)
		}
	})
}

// TestErrorsNotCached: an error reaches the caller and the next call
// fetches again.
func TestErrorsNotCached(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{})
	var fails, n atomic.Int64
	if _, _, err := c.get(context.Background(), "k", failing(&fails, errUpstream)); !errors.Is(err, errUpstream) {
		t.Fatal(err)
	}
	mustGet(t, c, "k", versions(&n, liveFacts), Miss)
	if fails.Load() != 1 || n.Load() != 1 {
		t.Errorf("fetches: failing %d, ok %d", fails.Load(), n.Load())
	}
}

// TestBypass: a route whose policy gives ttl <= 0 is fetched every time and
// never stored.
func TestBypass(t *testing.T) {
	c := newTestCache(t, Config{Routes: map[string]Policy{"r": {FreshTTL: -1}}}, newClock(), Options{})
	var n atomic.Int64
	fetch := versions(&n, liveFacts)
	for i := 1; i <= 3; i++ {
		if e := mustGet(t, c, "k", fetch, Bypass); body(e) != fmt.Sprintf("v%d", i) || e.TTL != 0 {
			t.Fatalf("call %d: %q ttl %v", i, body(e), e.TTL)
		}
	}
	other := liveFacts
	other.Route = "other" // the global policy caches it
	mustGet(t, c, "k2", counting(&n, "x", other), Miss)
	if s := c.Stats(); s.Bypass != 3 || s.Entries != 1 {
		t.Errorf("stats %+v: want bypass 3, entries 1", s)
	}
}

// TestSetConfig: a reload changes the TTLs of later inserts only, and a bad
// config is refused.
func TestSetConfig(t *testing.T) {
	clk := newClock()
	c := newTestCache(t, Config{}, clk, Options{})
	var n atomic.Int64
	old := mustGet(t, c, "a", versions(&n, liveFacts), Miss)
	if err := c.SetConfig(Config{Routes: map[string]Policy{"r": {FreshTTL: 10 * time.Second}}}); err != nil {
		t.Fatal(err)
	}
	if e := mustGet(t, c, "b", versions(&n, liveFacts), Miss); e.TTL != 10*time.Second {
		t.Errorf("new entry ttl %v, want 10s", e.TTL)
	}
	if e := mustGet(t, c, "a", versions(&n, liveFacts), Hit); e != old || e.TTL != time.Second {
		t.Errorf("held entry changed: ttl %v", e.TTL)
	}
	if err := c.SetConfig(Config{Policy: Policy{FreshTTL: time.Hour}}); err == nil {
		t.Fatal("SetConfig accepted fresh_ttl 1h")
	}
	if e := mustGet(t, c, "c", versions(&n, liveFacts), Miss); e.TTL != 10*time.Second {
		t.Errorf("after a refused reload ttl %v, want 10s kept", e.TTL)
	}
}

// TestImmutableAndNegative: the policy's TTLs reach the entries.
func TestImmutableAndNegative(t *testing.T) {
	clk := newClock()
	c := newTestCache(t, Config{}, clk, Options{})
	var n atomic.Int64
	found := mustGet(t, c, "tx1", counting(&n, `{"data":{}}`, Facts{Route: "tx", Class: normalize.ClassLookup}), Miss)
	null := Facts{Route: "tx", Class: normalize.ClassLookup}
	null.Meta.DataNull = true
	missing := mustGet(t, c, "tx2", counting(&n, `{"data":null}`, null), Miss)
	if !found.Immutable || found.TTL != defaultImmutableTTL || missing.Immutable || missing.TTL != defaultNegativeTTL {
		t.Fatalf("found %v/%v, null %v/%v", found.Immutable, found.TTL, missing.Immutable, missing.TTL)
	}
	clk.Advance(time.Hour)
	mustGet(t, c, "tx1", counting(&n, "", Facts{}), Hit)
}

// TestPanicInFetch: a panicking fetch is an error for its callers, not a
// crash, and leaves nothing behind.
func TestPanicInFetch(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{})
	_, _, err := c.get(context.Background(), "k", func(context.Context, func() bool) ([]byte, Facts, error) { panic("boom") })
	if err == nil {
		t.Fatal("no error from a panicking fetch")
	}
}

// TestClose: Close cancels running fetches, waits for them, and later calls
// get errClosed.
func TestClose(t *testing.T) {
	c, err := New(Config{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		_, _, err := c.get(context.Background(), "k", func(ctx context.Context, _ func() bool) ([]byte, Facts, error) {
			close(started)
			<-ctx.Done()
			return nil, Facts{}, ctx.Err()
		})
		errc <- err
	}()
	<-started
	c.Close()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("running Get: %v", err)
	}
	if _, _, err := c.get(context.Background(), "k", counting(new(atomic.Int64), "x", liveFacts)); !errors.Is(err, errClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	c.Close() // twice is fine
}

// TestStaleAfter: a miss holding a page inside stale_if_error is answered
// with it once the fetch has not answered within stale_after, and at once
// while that fetch runs; the fetch goes on (not abandoned) and refreshes
// the page.
func TestStaleAfter(t *testing.T) {
	clk := newClock()
	c := newTestCache(t, Config{StaleAfter: 20 * time.Millisecond, Policy: Policy{StaleWhileRevalidate: -1}}, clk, Options{})
	var n atomic.Int64
	mustGet(t, c, "k", versions(&n, liveFacts), Miss)
	clk.Advance(2 * time.Second) // past the TTL, inside stale_if_error

	release := make(chan struct{})
	var fetches atomic.Int64
	gaveUp := make(chan bool, 1)
	slow := func(_ context.Context, abandoned func() bool) ([]byte, Facts, error) {
		fetches.Add(1)
		<-release
		gaveUp <- abandoned()
		return []byte("v2"), liveFacts, nil
	}
	if e := mustGet(t, c, "k", slow, Stale); body(e) != "v1" {
		t.Fatalf("after stale_after: %q", body(e))
	}
	// The fetch still runs: the next caller gets the held page at once,
	// without waiting stale_after (a clock that cannot pass it says so).
	start := time.Now()
	if e := mustGet(t, c, "k", slow, Stale); body(e) != "v1" || fetches.Load() != 1 {
		t.Fatalf("during the fetch: %q, %d fetches", body(e), fetches.Load())
	}
	if took := time.Since(start); took >= 20*time.Millisecond {
		t.Errorf("a caller during the fetch waited %v", took)
	}
	close(release)
	if <-gaveUp {
		t.Error("the fetch left to refresh the page was told it was abandoned")
	}
	c.wg.Wait()
	if e := mustGet(t, c, "k", slow, Hit); body(e) != "v2" {
		t.Errorf("after the fetch: %q, want the refreshed v2", body(e))
	}
}

// A fetch that has only just begun is no sign of a slow legacy host: a
// caller arriving while it runs waits for it, for what is left of
// stale_after, and gets the fresh page, rather than a page up to
// stale_if_error old at once (docs/CONTRACT.md#errors: stale past
// stale-while-revalidate only when the legacy host fails).
func TestStaleAfterCountsFromTheFetchStart(t *testing.T) {
	clk := newClock()
	c := newTestCache(t, Config{StaleAfter: 2 * time.Second, Policy: Policy{StaleWhileRevalidate: -1}}, clk, Options{})
	var n atomic.Int64
	mustGet(t, c, "k", versions(&n, liveFacts), Miss)
	clk.Advance(30 * time.Second) // past the TTL, inside stale_if_error

	started, release := make(chan struct{}), make(chan struct{})
	fetch := func(context.Context, func() bool) ([]byte, Facts, error) {
		close(started)
		<-release
		return []byte("v2"), liveFacts, nil
	}
	first := make(chan *Entry, 1)
	go func() {
		r, err := c.Get(context.Background(), "k", fetch)
		if err != nil {
			t.Error(err)
		}
		first <- r.Entry
	}()
	<-started
	second := make(chan *Entry, 1)
	go func() {
		r, err := c.Get(context.Background(), "k", fetch)
		if err != nil {
			t.Error(err)
		}
		second <- r.Entry
	}()
	chans := []chan *Entry{first, second}
	select {
	case e := <-second:
		t.Errorf("a caller during a fetch begun just now was answered %q at once", body(e))
		chans = chans[:1]
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	for _, ch := range chans {
		if e := <-ch; body(e) != "v2" {
			t.Errorf("answered %q, want the fetched v2", body(e))
		}
	}
}
