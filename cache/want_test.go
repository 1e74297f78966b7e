package cache

import (
	"context"
	"testing"
	"time"
)

// TestAbandoned: a fetch can tell when every caller waiting on it has gone
// (no retry once the client has gone).
func TestAbandoned(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{})
	both := waiting(2, c)
	inFetch := make(chan func() bool, 1)
	release := make(chan struct{})
	fetch := func(_ context.Context, abandoned func() bool) ([]byte, Facts, error) {
		inFetch <- abandoned
		<-release
		return []byte(`{}`), liveFacts, nil
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	ctx2, cancel2 := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	for _, ctx := range []context.Context{ctx1, ctx2} {
		go func() {
			_, _, _ = c.get(ctx, "k", fetch)
			done <- struct{}{}
		}()
	}
	abandoned := <-inFetch
	<-both
	if abandoned() {
		t.Fatal("abandoned while two callers wait")
	}
	cancel1()
	<-done
	if abandoned() {
		t.Fatal("abandoned while one caller waits")
	}
	cancel2()
	<-done
	if !abandoned() {
		t.Fatal("not abandoned once every caller left")
	}
	close(release)
}

// TestRefreshNotAbandoned: a background refresh nobody joined is never
// abandoned: the cache itself wants the page.
func TestRefreshNotAbandoned(t *testing.T) {
	clk := newClock()
	c := newTestCache(t, Config{}, clk, Options{})
	mustGet(t, c, "k", func(context.Context, func() bool) ([]byte, Facts, error) {
		return []byte("v1"), liveFacts, nil
	}, Miss)
	clk.Advance(1500 * time.Millisecond) // past the TTL, inside stale_while_revalidate
	gone := make(chan bool, 1)
	ctx, cancel := context.WithCancel(context.Background())
	_, st, err := c.get(ctx, "k", func(_ context.Context, abandoned func() bool) ([]byte, Facts, error) {
		cancel() // the caller that started the refresh has gone
		gone <- abandoned()
		return []byte("v2"), liveFacts, nil
	})
	if err != nil || st != Stale {
		t.Fatalf("Get: %v, %v; want a stale page", st, err)
	}
	if <-gone {
		t.Error("a background refresh nobody joined is abandoned")
	}
	c.wg.Wait()
}
