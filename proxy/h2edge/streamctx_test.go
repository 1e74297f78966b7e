package h2edge_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"tradergate/proxy/h2edge"
)

// A stream's context behaves as one from context.WithCancel under the
// server's BaseContext would: contexts derived from it and AfterFuncs
// end with it, without a goroutine each, and context.Cause names the
// base context's cause once that has ended, context.Canceled otherwise.
func TestStreamContext(t *testing.T) {
	errStopping := errors.New("stopping")
	base, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	type seen struct {
		err, cause, derivedErr, derivedCause error
		afterRan, stopped                    bool
	}
	results := make(chan seen, 4)
	proceed := make(chan struct{})
	started := make(chan struct{}, 4)
	addr := serve(t, &h2edge.Server{BaseContext: base, Handler: func(st *h2edge.Stream) {
		ctx := st.Context()
		goroutines := runtime.NumGoroutine()
		derived, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		ran := make(chan struct{})
		context.AfterFunc(ctx, func() { close(ran) })
		// One AfterFunc stopped before the end never runs (stop says
		// so); on a context already ended it runs at once (stop says
		// it could not stop it).
		stopped := context.AfterFunc(ctx, func() {})()
		// Derived contexts register with the stream's rather than
		// watching it from a goroutine of their own (each would be one
		// more here; +1 for a runner the connection may start meanwhile).
		if n := runtime.NumGoroutine(); ctx.Err() == nil && n > goroutines+1 {
			t.Errorf("%d goroutines while the handler waits, %d before", n, goroutines)
		}
		started <- struct{}{}
		<-ctx.Done()
		<-derived.Done()
		<-ran
		results <- seen{ctx.Err(), context.Cause(ctx), derived.Err(), context.Cause(derived), true, stopped}
		<-proceed
	}})

	// The client resets the stream: Canceled, and Canceled is the cause.
	c := dialRaw(t, addr)
	c.headers(1, true)
	<-started
	if err := c.fr.WriteRSTStream(1, http2.ErrCodeCancel); err != nil {
		t.Fatal(err)
	}
	got := <-results
	want := seen{context.Canceled, context.Canceled, context.Canceled, context.Canceled, true, true}
	if got != want {
		t.Errorf("after the client's reset: %+v, want %+v", got, want)
	}
	proceed <- struct{}{}

	// The base context ends while a handler waits: its context ends,
	// and the cause is the base's.
	c.headers(3, true)
	<-started
	stop(errStopping)
	got = <-results
	want = seen{context.Canceled, errStopping, context.Canceled, errStopping, true, true}
	if got != want {
		t.Errorf("after the base context ended: %+v, want %+v", got, want)
	}
	close(proceed)

	// A stream started after the base context ended starts cancelled.
	c.headers(5, true)
	<-started
	got = <-results
	want.stopped = false
	if got != want {
		t.Errorf("a stream after the base context ended: %+v, want %+v", got, want)
	}
}

// A handler's context is cancelled when the handler returns, and an
// AfterFunc registered after that runs at once.
func TestStreamContextEndsWithTheHandler(t *testing.T) {
	kept := make(chan context.Context, 1)
	addr := serve(t, &h2edge.Server{Handler: func(st *h2edge.Stream) {
		kept <- st.Context()
		echo(st)
	}})
	c := dialRaw(t, addr)
	c.headers(1, true)
	c.answer(1)
	ctx := <-kept
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the context outlived its handler")
	}
	ran := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { close(ran) })
	<-ran
	if stop() {
		t.Error("stop reported stopping an AfterFunc that ran")
	}
	if ctx.Err() != context.Canceled || context.Cause(ctx) != context.Canceled {
		t.Errorf("Err %v, Cause %v; want Canceled", ctx.Err(), context.Cause(ctx))
	}
}
