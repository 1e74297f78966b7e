package native

import (
	"context"
	"sync"
)

// Shadow work: after a client's answer is written, a sampled share of the
// misses served from the legacy host is fetched again from native and
// compared. It has its own workers, queue and breaker per route, and only
// the native client: it never spends a client's quota, a legacy shield
// slot or a legacy call, and never delays an answer.

// job is one comparison waiting for a worker.
type job struct {
	rs     *routeState
	rg     *routeGen
	cli    *client
	legacy []byte
	target string // the /v1 path and canonical query
}

// shadowPool runs comparisons on a fixed number of workers, from a
// bounded queue.
type shadowPool struct {
	jobs   chan job
	run    func(context.Context, job)
	ctx    context.Context // canceled by close: abandons calls in flight
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

func newShadowPool(cfg ShadowConfig, run func(context.Context, job)) *shadowPool {
	p := &shadowPool{jobs: make(chan job, max(cfg.Queue, 1)), run: run}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	for range max(cfg.Workers, 1) {
		p.wg.Add(1)
		go p.work()
	}
	return p
}

// offer queues j, or reports false when the queue is full or the pool
// closed.
func (p *shadowPool) offer(j job) bool {
	if p.ctx.Err() != nil {
		return false
	}
	select {
	case p.jobs <- j:
		return true
	default:
		return false
	}
}

func (p *shadowPool) work() {
	defer p.wg.Done()
	for {
		select {
		case <-p.ctx.Done():
			return
		case j := <-p.jobs:
			if p.ctx.Err() != nil {
				return
			}
			p.run(p.ctx, j)
		}
	}
}

// close abandons the comparisons in flight, drops those queued and waits
// for the workers to return.
func (p *shadowPool) close() {
	p.once.Do(func() {
		p.cancel()
		p.wg.Wait()
	})
}

// Shadow offers one miss of route that the legacy host served for a
// comparison with native, once the client's answer is made. immutable
// is the cache policy's verdict on the page (the stored entry's
// cache.Entry.Immutable): only
// immutable pages are compared, since a fresh page may change between
// the two reads; a fresh page is counted as skipped without calling
// native, to spare it the load. legacyBody is the variant A answer the
// client got; Shadow keeps it until the comparison is done, so the caller
// must not change it afterwards (a cached page's bytes never change).
// pathAndQuery is as for Fetch. Shadow never blocks: when the queue is
// full the comparison is dropped and counted. Call it only for answers
// from the legacy host; it does nothing on a route that does not shadow.
func (b *Backend) Shadow(routeName string, immutable bool, legacyBody []byte, pathAndQuery string) {
	g := b.gen.Load()
	rg, rs := g.routes[routeName], b.routes[routeName]
	if rg == nil || g.cli == nil || !rg.shadows() || !sampled(rg.rc.sample()) {
		return
	}
	if !immutable {
		rs.outcome(b.metrics, Skipped)
		return
	}
	if !b.shadow.offer(job{rs: rs, rg: rg, cli: g.cli, legacy: legacyBody, target: pathAndQuery}) {
		rs.dropped.Add(1)
		b.metrics.dropped.WithLabelValues(rs.name).Inc()
	}
}

// Shadows reports whether a miss of route that the legacy host serves is
// to be offered to Shadow now: native is configured and the route
// compares (shadow, canary, or native once rolled back). The caller can
// spare the work of an offer that Shadow would ignore.
func (b *Backend) Shadows(routeName string) bool {
	g := b.gen.Load()
	rg := g.routes[routeName]
	return rg != nil && g.cli != nil && rg.shadows()
}

// shadows reports whether the route compares legacy-served misses: in
// shadow and canary modes, and in native mode once rolled back.
func (rg *routeGen) shadows() bool {
	switch rg.rc.Mode {
	case ModeShadow, ModeCanary:
		return true
	case ModeNative:
		return rg.rb.rolledBack()
	}
	return false
}

// compare is one shadow job: the native call through the route's shadow
// breaker, the contract check and the comparison.
func (b *Backend) compare(ctx context.Context, j job) {
	body, e := j.cli.get(ctx, j.rg.shadowBr, j.target)
	var v []string
	if e == nil {
		v = b.violations(j.rs.name, body)
	}
	switch {
	case e != nil && e.Result == Canceled:
		b.called(j.rs, j.rg, Canceled, tally{})
		return
	case e != nil:
		b.called(j.rs, j.rg, e.Result, tally{})
		j.rs.outcome(b.metrics, NativeError)
		return
	}
	c, err := Compare(j.legacy, body)
	if err != nil {
		// The native body is JSON (the client checked it): the legacy
		// answer the caller passed is not. Nothing to learn of native.
		b.called(j.rs, j.rg, OK, tally{})
		b.log.Warn("native shadow: the legacy answer is not JSON", "route", j.rs.name, "err", err)
		return
	}
	j.rs.differences(c, b.now())
	if len(v) > 0 {
		b.called(j.rs, j.rg, ContractBreak, tally{})
		j.rs.outcome(b.metrics, ContractBroken)
		return
	}
	t := tally{compared: 1}
	o := Equal
	if c.Count > 0 {
		t.differed, o = 1, Different
	}
	b.called(j.rs, j.rg, OK, t)
	j.rs.outcome(b.metrics, o)
}
