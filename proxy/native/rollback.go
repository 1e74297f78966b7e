package native

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// A route in canary or native mode goes back to legacy by itself when,
// over the last rollback.window, native's error ratio or the difference
// ratio passes its bound with at least rollback.min_requests behind it
// (docs/ARCHITECTURE.md "Moving the backend"). It stays back, still
// shadowing so the figures keep coming, until a reload re-arms it: an
// operator decides when native is trusted again.

// windowBuckets is how finely the window slides: counts leave the window a
// bucket (window/windowBuckets) at a time.
const windowBuckets = 20

// tally is what one bucket counted.
type tally struct {
	calls, errors      int // native calls, and those that failed
	compared, differed int // comparisons, and those that found differences
}

func (t *tally) add(o tally) {
	t.calls += o.calls
	t.errors += o.errors
	t.compared += o.compared
	t.differed += o.differed
}

// window counts over a sliding span of time, in buckets.
type window struct {
	span    time.Duration
	width   time.Duration
	buckets [windowBuckets]tally
	starts  [windowBuckets]int64 // bucket number held by each slot
}

func newWindow(span time.Duration) window {
	w := window{span: span, width: max(span/windowBuckets, 1)}
	for i := range w.starts {
		w.starts[i] = -1
	}
	return w
}

// add counts t at now.
func (w *window) add(now time.Time, t tally) {
	n := now.UnixNano() / int64(w.width)
	i := n % windowBuckets
	if i < 0 {
		i += windowBuckets
	}
	if w.starts[i] != n {
		w.starts[i], w.buckets[i] = n, tally{}
	}
	w.buckets[i].add(t)
}

// sum is what the window holds at now.
func (w *window) sum(now time.Time) tally {
	n := now.UnixNano() / int64(w.width)
	var s tally
	for i := range w.buckets {
		if b := w.starts[i]; b > n-windowBuckets && b <= n {
			s.add(w.buckets[i])
		}
	}
	return s
}

// rollback is one route's window and state.
type rollback struct {
	mu    sync.Mutex
	cfg   RollbackConfig
	armed bool // the configured mode puts clients on native
	win   window
	back  bool
	// tripped mirrors back for readers that must not wait (Decide).
	tripped atomic.Bool
	reason  string
	at      time.Time
}

func newRollback(cfg RollbackConfig, armed bool) *rollback {
	return &rollback{cfg: cfg, armed: armed, win: newWindow(cfg.Window)}
}

// record counts t at now and reports whether this tripped the rollback,
// with its reason.
func (r *rollback) record(now time.Time, t tally) (tripped bool, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.win.add(now, t)
	if r.back || !r.armed {
		return false, ""
	}
	s := r.win.sum(now)
	min := r.cfg.MinRequests
	switch {
	case s.calls >= min && float64(s.errors) > r.cfg.ErrorRatio*float64(s.calls):
		reason = fmt.Sprintf("native error ratio %.3f (%d of %d calls in %v) passed rollback.error_ratio %v",
			float64(s.errors)/float64(s.calls), s.errors, s.calls, r.cfg.Window, r.cfg.ErrorRatio)
	case s.compared >= min && float64(s.differed) > r.cfg.DiffRatio*float64(s.compared):
		reason = fmt.Sprintf("difference ratio %.3f (%d of %d comparisons in %v) passed rollback.diff_ratio %v",
			float64(s.differed)/float64(s.compared), s.differed, s.compared, r.cfg.Window, r.cfg.DiffRatio)
	default:
		return false, ""
	}
	r.back, r.reason, r.at = true, reason, now
	r.tripped.Store(true)
	return true, reason
}

// rolledBack reports whether the route went back to legacy.
func (r *rollback) rolledBack() bool { return r.tripped.Load() }

// state is the rollback's state and the window's counts at now.
func (r *rollback) state(now time.Time) (back bool, reason string, at time.Time, w tally) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.back, r.reason, r.at, r.win.sum(now)
}
