package load

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Phases of a timed run. Workers read the phase when an answer completes,
// so a request counts when it finishes inside the window, whenever it
// started: the server is in steady state when the window opens.
const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseDone
)

// Run performs one load run and returns what it measured. It returns an
// error only when the run could not happen at all; server errors are
// counted in the Result.
func Run(ctx context.Context, s Spec) (*Result, error) {
	s.applyDefaults()
	if err := s.validate(); err != nil {
		return nil, err
	}
	switch s.Mode {
	case ModeStampede:
		return runStampede(ctx, &s)
	case ModeH2load:
		return runH2load(ctx, &s)
	case ModeIdle:
		return runIdle(ctx, &s)
	}
	switch {
	case s.TLS != nil && s.TLS.HTTP2:
		return runH2(ctx, &s)
	case s.Rate > 0:
		return runOpenH1(ctx, &s)
	}
	return runTimed(ctx, &s)
}

// worker is one connection of a timed run, with its own tallies so that
// nothing is shared on the hot path but the phase.
type worker struct {
	spec *Spec
	tls  *tls.Config // nil: plain TCP
	pick picker
	c    *conn
	hist Histogram
	// served is an open-loop run's latencies without the load
	// generator's own lateness (servedLatency).
	served Histogram
	status [600]int64
	stats  tally
	n      int
	// kept are the window's answers, with Spec.KeepAnswers: sent after
	// windowStart (a closed loop's request is due when it is sent).
	kept        []openAnswer
	windowStart *atomic.Int64
}

// tally holds a worker's counts in the window.
type tally struct {
	requests, errors, transport, body int64
	handshakes, resumed               int64
	cacheSampled, cacheUnexpected     int64
	cache                             map[string]int64
}

func (w *worker) run(ctx context.Context, phase *atomic.Int32) {
	defer w.c.close()
	for phase.Load() != phaseDone && ctx.Err() == nil {
		// dialed is when this request's connection was opened, if it was
		// opened for it: a new-connection row's latency includes the
		// handshake.
		var dialed time.Time
		if w.c == nil {
			dialed = time.Now()
			c, ok := w.dial(phase.Load() == phaseMeasure)
			if !ok {
				continue
			}
			if w.tls != nil && phase.Load() == phaseMeasure {
				w.stats.handshakes++
				if c.resumed {
					w.stats.resumed++
				}
			}
		}
		req := w.pick.next()
		if req == nil {
			return
		}
		w.n++
		sample := (w.spec.CheckCache != "" || w.spec.SampleCache) && w.n%w.spec.SampleEvery == 0
		start := time.Now()
		resp, err := w.c.roundTrip(req, start.Add(w.spec.Timeout), sample)
		if !dialed.IsZero() && w.spec.TLS != nil && w.spec.TLS.NewConnection {
			start = dialed
		}
		d := time.Since(start)
		measuring := phase.Load() == phaseMeasure
		if !w.settle(resp, err, measuring) || !measuring {
			continue
		}
		w.record(resp, d, sample)
		if w.spec.KeepAnswers {
			w.kept = append(w.kept, openAnswer{(start.UnixNano() - w.windowStart.Load()) / 1e3, d.Microseconds(), 0, 0})
		}
	}
}

// dial connects w, counting a failure as a transport error when measuring
// is set. After a failure it pauses, so a server that refuses does not
// make the worker spin.
func (w *worker) dial(measuring bool) (*conn, bool) {
	c, err := dial(w.spec.Addr, w.tls)
	if err != nil {
		if measuring {
			w.stats.errors++
			w.stats.transport++
		}
		time.Sleep(10 * time.Millisecond)
		return nil, false
	}
	w.c = c
	return c, true
}

// settle keeps or drops w's connection after a round trip: a failed one
// is dropped and, when measuring is set, counted as a transport error; an
// answer that closes the connection drops it too. It reports whether an
// answer came.
func (w *worker) settle(resp response, err error, measuring bool) bool {
	if err != nil || resp.close {
		w.c.close()
		w.c = nil
	}
	if err != nil && measuring {
		w.stats.errors++
		w.stats.transport++
	}
	return err == nil
}

func (w *worker) record(resp response, d time.Duration, sample bool) {
	w.stats.requests++
	w.hist.Record(d)
	w.stats.body += resp.body
	if resp.status > 0 && resp.status < len(w.status) {
		w.status[resp.status]++
	}
	if resp.status < 200 || resp.status > 299 {
		w.stats.errors++
	}
	if sample {
		if w.stats.cache == nil {
			w.stats.cache = map[string]int64{}
		}
		w.stats.cache[resp.cache]++
		w.stats.cacheSampled++
		if w.spec.CheckCache != "" && resp.cache != w.spec.CheckCache {
			w.stats.cacheUnexpected++
		}
	}
}

func runTimed(ctx context.Context, s *Spec) (*Result, error) {
	var tc *tls.Config
	if s.TLS != nil {
		var err error
		if tc, err = clientTLS(s.TLS); err != nil {
			return nil, err
		}
		if s.TLS.NewConnection {
			s.Headers = append(slices.Clone(s.Headers), "Connection: close")
		}
	}
	pickers := newPickers(s)
	workers := make([]*worker, s.Connections)
	// Dial every connection before the clock starts, so that a server that
	// is not listening fails the run instead of reading as zero req/s.
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

	var phase atomic.Int32
	var windowStart atomic.Int64
	for _, w := range workers {
		w.windowStart = &windowStart
	}
	var wg sync.WaitGroup
	// finished closes when every worker has stopped: a bounded sequence
	// ran out, which ends the run early.
	finished := make(chan struct{})
	startWorkers := func() {
		for _, w := range workers {
			wg.Go(func() { w.run(ctx, &phase) })
		}
		go func() {
			wg.Wait()
			close(finished)
		}()
	}

	p := newProbe(s)
	res := &Result{}
	var before counters
	if s.Warmup > 0 {
		startWorkers()
		waitFor(ctx, s.Warmup, finished)
		before = p.read(ctx)
		windowStart.Store(time.Now().UnixNano())
		phase.Store(phaseMeasure)
	} else {
		// No warm-up: every request counts, the first ones included.
		before = p.read(ctx)
		windowStart.Store(time.Now().UnixNano())
		phase.Store(phaseMeasure)
		startWorkers()
	}
	t0 := time.Unix(0, windowStart.Load())
	waitFor(ctx, s.Duration, finished)
	phase.Store(phaseDone)
	res.Window = time.Since(t0)
	after := p.read(ctx)
	<-finished
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	p.fill(res, before, after)
	var h Histogram
	res.Status = map[int]int64{}
	answers := make([][]openAnswer, len(workers))
	for i, w := range workers {
		h.Merge(&w.hist)
		w.stats.addTo(res, w.status[:])
		answers[i] = w.kept
	}
	res.WindowStart = t0
	finishOpen(res, s, &h, nil, answers, window{})
	return res, nil
}

// waitFor waits d, or until ctx ends or done closes.
func waitFor(ctx context.Context, d time.Duration, done <-chan struct{}) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-done:
	}
}
