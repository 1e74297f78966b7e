package h2edge

import (
	"context"
	"slices"
	"sync"
	"time"
)

// streamCtx is a stream's context (Stream.Context), part of the Stream
// itself: context.WithCancel made two allocations per request (the
// cancelCtx and its cancel function) and entered every stream in the
// server's base context's table of children, under that context's one
// lock. It is cancelled when the stream closes, its handler returns, or
// the base context ends (the server's base watch, Server.watchBase).
//
// It keeps the standard library's guarantees: a context derived from it
// (WithTimeout, WithCancel) or given to context.AfterFunc registers
// through AfterFunc, the afterFuncer interface the context package
// looks for, rather than on a goroutine of its own; context.Cause
// gives the base context's cause once both have ended (the edge's
// shutdown), and its Err otherwise.
type streamCtx struct {
	parent context.Context

	mu     sync.Mutex
	done   chan struct{} // made by the first Done
	err    error
	afters []*afterFunc
}

// afterFunc is one function registered with streamCtx.AfterFunc; its
// address is what stop finds it by.
type afterFunc struct{ f func() }

// closedChan is the Done of a context cancelled before anyone asked.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (c *streamCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }

func (c *streamCtx) Value(key any) any { return c.parent.Value(key) }

func (c *streamCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.err != nil {
			return closedChan
		}
		c.done = make(chan struct{})
	}
	return c.done
}

func (c *streamCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc runs f once c is cancelled (at once, when it is already),
// as context.AfterFunc does; stop unregisters f, and reports whether it
// did so before f was started.
func (c *streamCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	a := &afterFunc{f: f}
	c.afters = append(c.afters, a)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		i := slices.Index(c.afters, a)
		if i < 0 {
			return false
		}
		c.afters = slices.Delete(c.afters, i, i+1)
		return true
	}
}

// cancel ends c with err, the first time; the functions registered run
// on the caller's goroutine, as a cancelCtx cancels its children: they
// are the context package's own (cancelling a derived context, or
// starting an AfterFunc's goroutine), which take no lock of the
// connection's.
func (c *streamCtx) cancel(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	afters := c.afters
	c.afters = nil
	c.mu.Unlock()
	for _, a := range afters {
		a.f()
	}
}

// started: the stream's handler was given c (dispatchLocked).
func (c *streamCtx) started() bool { return c.parent != nil }
