package load

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"sync"
	"time"
)

// An open-loop run (Spec.Rate) sends requests on a fixed schedule, as
// wrk2 does, and times every answer from the moment its request was due,
// not from when it was sent. A closed loop sends the next request only
// when the last answer is in, so a server that pauses is sent nothing
// while it pauses, and the requests that would have waited behind the
// pause are never measured (coordinated omission); its tail shows how
// often the server paused, not how long users waited. On a schedule, a
// pause delays every request due during it, and each one counts.

// schedule is the plan of an open-loop run: the j-th request of the run is
// due at start + j/rate, and connection k of n sends requests k, k+n,
// k+2n..., so that the connections' requests interleave evenly. Due times
// are computed from the start, never accumulated, so they do not drift.
type schedule struct {
	start time.Time
	rate  float64 // requests a second, all connections together
	n     int     // connections
}

// due is when connection k's i-th request is due.
func (s schedule) due(k int, i int64) time.Time {
	j := i*int64(s.n) + int64(k)
	return s.start.Add(time.Duration(float64(j) * float64(time.Second) / s.rate))
}

// window is an open-loop run's measured window: the requests due in
// [from, to) count. Requests due before it are the warm-up. Requests
// due in it but not yet sent when it ends are still sent, until drain:
// those the server made wait belong to the window most of all. Any still
// unsent then are counted (Result.Unsent).
type window struct {
	from, to, drain time.Time
}

// openTally is what the sending side of a connection counts, apart from
// the answers: its own lateness and what it never sent.
type openTally struct {
	// lag is how late the load generator sent requests whose connection
	// was free when they were due: its own timer and scheduling delay,
	// which every server's figures include alike.
	lag    Histogram
	unsent int64
	// sendErrors are requests of the window whose write failed before
	// the connection's reader took them (HTTP/2).
	sendErrors int64
}

// openAnswer is one answer of a run that keeps them (Spec.KeepAnswers):
// when its request was due, after the window opened, its latency, how
// long after it was due it was sent, and how much of that it waited for
// its connection (busy with the answer before, or every HTTP/2 stream in
// use; the rest is the load generator's own lateness), in microseconds.
type openAnswer struct {
	due, latency, sent, conn int64
}

// servedLatency is an answer's latency without the load generator's own
// lateness: late is how long after its due time the request was sent,
// connWait how much of that it waited for its connection (the answer
// before it, or every HTTP/2 stream in use), which stays in, as the
// server's doing. The rest is the load generator's: its timers fire up
// to a millisecond late (Go's scheduler sleeps in whole milliseconds when
// it has nothing to run) and its own stops, and every server's latency
// holds them alike (docs/BENCHMARKS.md, "Where the fixed rate's tail is
// set").
func servedLatency(latency, late, connWait time.Duration) time.Duration {
	return latency - max(late-connWait, 0)
}

// runOpenH1 sends s.Rate requests a second over s.Connections keep-alive
// HTTP/1.1 connections (TLS with s.TLS), one request at a time per
// connection: a request due while its connection still waits for an
// answer is sent as soon as that answer is in, and its latency includes
// the wait.
func runOpenH1(ctx context.Context, s *Spec) (*Result, error) {
	var tc *tls.Config
	if s.TLS != nil {
		var err error
		if tc, err = clientTLS(s.TLS); err != nil {
			return nil, err
		}
	}
	pickers := newPickers(s)
	workers := make([]*worker, s.Connections)
	for i := range workers {
		c, err := dial(s.Addr, tc)
		if err != nil {
			for _, w := range workers[:i] {
				w.c.close()
			}
			return nil, fmt.Errorf("dial %s: %w", s.Addr, err)
		}
		workers[i] = &worker{spec: s, tls: tc, pick: pickers[i], c: c}
	}
	sch, win := openPlan(s, time.Now())
	tallies := make([]openTally, len(workers))
	answers := make([][]openAnswer, len(workers))
	var wg sync.WaitGroup
	for k, w := range workers {
		wg.Go(func() { answers[k] = w.runOpen(ctx, sch, k, win, &tallies[k]) })
	}
	res, err := measureOpen(ctx, s, win, wg.Wait)
	if err != nil {
		return nil, err
	}
	var h, served Histogram
	res.Status = map[int]int64{}
	for k, w := range workers {
		h.Merge(&w.hist)
		served.Merge(&w.served)
		w.stats.addTo(res, w.status[:])
		res.Unsent += tallies[k].unsent
	}
	finishOpen(res, s, &h, tallies, answers, win)
	res.Served = summarize(&served)
	return res, nil
}

// openPlan lays out an open-loop run starting now: a short lead so that
// every connection's first request is in the future, the warm-up, the
// window and its drain.
func openPlan(s *Spec, now time.Time) (schedule, window) {
	start := now.Add(10 * time.Millisecond)
	from := start.Add(s.Warmup)
	to := from.Add(s.Duration)
	return schedule{start: start, rate: s.Rate, n: s.Connections}, window{from: from, to: to, drain: to.Add(min(s.Timeout, 2*time.Second))}
}

// measureOpen reads the counters at the window's edges while the
// connections run, then waits for them (wait) and returns the result's
// frame. The CPU figures cover the window, the drain left out.
func measureOpen(ctx context.Context, s *Spec, win window, wait func()) (*Result, error) {
	p := newProbe(s)
	sleepUntil(ctx, win.from)
	before := p.read(ctx)
	sleepUntil(ctx, win.to)
	after := p.read(ctx)
	wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := &Result{Rate: s.Rate, Window: win.to.Sub(win.from), WindowStart: win.from}
	p.fill(res, before, after)
	return res, nil
}

// finishOpen sets the figures every open-loop run derives the same way.
func finishOpen(res *Result, s *Spec, h *Histogram, tallies []openTally, answers [][]openAnswer, win window) {
	var lag Histogram
	for i := range tallies {
		lag.Merge(&tallies[i].lag)
	}
	res.Latency, res.Lag = summarize(h), summarize(&lag)
	if res.Window > 0 {
		res.RPS = float64(res.Requests) / res.Window.Seconds()
	}
	if s.KeepAnswers {
		for _, a := range answers {
			for _, x := range a {
				res.Answers = append(res.Answers, [4]int64{x.due, x.latency, x.sent, x.conn})
			}
		}
		slices.SortFunc(res.Answers, func(a, b [4]int64) int { return int(a[0] - b[0]) })
	}
}

// runOpen is one connection of runOpenH1: it sends requests k, k+n... of
// the schedule until the window ends, and returns the answers it kept.
func (w *worker) runOpen(ctx context.Context, sch schedule, k int, win window, t *openTally) []openAnswer {
	defer func() { w.c.close() }()
	var kept []openAnswer
	// free is when the connection's last answer was in: a request due
	// before it waited for the connection.
	var free time.Time
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for i := int64(0); ctx.Err() == nil; i++ {
		due := sch.due(k, i)
		if !due.Before(win.to) {
			break
		}
		now := time.Now()
		if now.After(win.drain) {
			// Still behind after the drain: what is left of the window
			// was never sent.
			t.unsent += unsentFrom(sch, k, i, win)
			break
		}
		measuring := !due.Before(win.from)
		if wait := due.Sub(now); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return kept
			}
			if measuring {
				t.lag.Record(time.Since(due))
			}
		}
		if w.c == nil {
			if _, ok := w.dial(measuring); !ok {
				continue
			}
		}
		req := w.pick.next()
		w.n++
		sample := (w.spec.CheckCache != "" || w.spec.SampleCache) && w.n%w.spec.SampleEvery == 0
		sent := time.Now()
		resp, err := w.c.roundTrip(req, sent.Add(w.spec.Timeout), sample)
		d := time.Since(due)
		connWait := min(max(free.Sub(due), 0), max(sent.Sub(due), 0))
		free = due.Add(d)
		if !w.settle(resp, err, measuring) {
			continue
		}
		if measuring {
			w.record(resp, d, sample)
			w.served.Record(servedLatency(d, sent.Sub(due), connWait))
			if w.spec.KeepAnswers {
				kept = append(kept, openAnswer{due.Sub(win.from).Microseconds(), d.Microseconds(), sent.Sub(due).Microseconds(), connWait.Microseconds()})
			}
		}
	}
	return kept
}

// unsentFrom counts connection k's requests from the i-th on that are
// due in the window.
func unsentFrom(sch schedule, k int, i int64, win window) int64 {
	var n int64
	for ; ; i++ {
		due := sch.due(k, i)
		if !due.Before(win.to) {
			return n
		}
		if !due.Before(win.from) {
			n++
		}
	}
}

// sleepUntil sleeps until t, or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

// addTo adds a connection's counts to the run's result.
func (t *tally) addTo(res *Result, status []int64) {
	for code, n := range status {
		if n > 0 {
			res.Status[code] += n
		}
	}
	res.Requests += t.requests
	res.Errors += t.errors
	res.TransportErrors += t.transport
	res.BodyBytes += t.body
	res.CacheSampled += t.cacheSampled
	res.CacheUnexpected += t.cacheUnexpected
	res.Handshakes += t.handshakes
	res.Resumed += t.resumed
	for k, v := range t.cache {
		if res.Cache == nil {
			res.Cache = map[string]int64{}
		}
		res.Cache[k] += v
	}
}
