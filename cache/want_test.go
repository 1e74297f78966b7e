package cache

import (
	"context"
	"testing"
)

// TestAbandoned: a fetch can tell when every caller waiting on it has gone
// (no retry once the client has gone), and a background refresh
// nobody joined is never abandoned.
func TestAbandoned(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{})
	hook, waiting := barrier(2)
	c.testHookWaiting = hook
	inFetch := make(chan context.Context, 1)
	release := make(chan struct{})
	fetch := func(ctx context.Context) ([]byte, Facts, error) {
		inFetch <- ctx
		<-release
		return []byte(`{}`), liveFacts, nil
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	ctx2, cancel2 := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	for _, ctx := range []context.Context{ctx1, ctx2} {
		go func() {
			_, _, _ = c.Get(ctx, "k", fetch)
			done <- struct{}{}
		}()
	}
	fctx := <-inFetch
	<-waiting
	if Abandoned(fctx) {
		t.Fatal("abandoned while two callers wait")
	}
	cancel1()
	<-done
	if Abandoned(fctx) {
		t.Fatal("abandoned while one caller waits")
	}
	cancel2()
	<-done
	if !Abandoned(fctx) {
		t.Fatal("not abandoned once every caller left")
	}
	close(release)
	if Abandoned(context.Background()) {
		t.Error("a context outside any fetch is abandoned")
	}
}
