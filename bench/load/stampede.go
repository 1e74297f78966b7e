package load

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// runStampede sends, in each round, one request per connection for the
// same cold URL, all released at once, and reads the upstream's counter
// between rounds: a cache that coalesces misses lets exactly one through
// per round (the stampede target: "256 clients on one cold key, upstream calls must be
// 1"). The connections are dialled first so that the round is a burst of
// requests, not of handshakes.
func runStampede(ctx context.Context, s *Spec) (*Result, error) {
	conns := make([]*conn, s.Connections)
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	for i := range conns {
		c, err := dial(s.Addr, nil)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", s.Addr, err)
		}
		conns[i] = c
	}
	tail := requestTail(s.Addr, s.Headers)
	p := newProbe(s)
	res := &Result{Status: map[int]int64{}, Cache: map[string]int64{}}
	var h Histogram
	first := p.read(ctx)
	t0 := time.Now()
	type answer struct {
		resp response
		d    time.Duration
		err  error
	}
	answers := make([]answer, len(conns))
	for round := range s.Rounds {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		req := buildRequest(s.URLs[round], tail)
		before := p.read(ctx)
		release := make(chan struct{})
		var wg sync.WaitGroup
		for i, c := range conns {
			wg.Go(func() {
				<-release
				start := time.Now()
				resp, err := c.roundTrip(req, start.Add(s.Timeout), true)
				answers[i] = answer{resp, time.Since(start), err}
			})
		}
		close(release)
		wg.Wait()
		after := p.read(ctx)
		if before.upErr == nil && after.upErr == nil && s.StatsURL != "" {
			res.UpstreamPerRound = append(res.UpstreamPerRound, after.upstream-before.upstream)
		}
		for i, a := range answers {
			res.Requests++
			if a.err != nil {
				res.Errors++
				res.TransportErrors++
				conns[i].close()
				if conns[i], a.err = dial(s.Addr, nil); a.err != nil {
					return nil, fmt.Errorf("redial %s: %w", s.Addr, a.err)
				}
				continue
			}
			h.Record(a.d)
			res.BodyBytes += a.resp.body
			res.Status[a.resp.status]++
			if a.resp.status < 200 || a.resp.status > 299 {
				res.Errors++
			}
			res.Cache[a.resp.cache]++
			res.CacheSampled++
			if a.resp.close {
				conns[i].close()
				if conns[i], a.err = dial(s.Addr, nil); a.err != nil {
					return nil, fmt.Errorf("redial %s: %w", s.Addr, a.err)
				}
			}
		}
	}
	res.Window = time.Since(t0)
	last := p.read(ctx)
	p.fill(res, first, last)
	res.Latency = summarize(&h)
	res.RPS = float64(res.Requests) / res.Window.Seconds()
	return res, nil
}
