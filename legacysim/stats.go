package legacysim

import (
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
)

// Stats counts what reached the simulated host, so that tests can prove
// what the edge forwarded (coalescing, caching, retries).
type Stats struct {
	Requests    int64            // requests answered (any status); counted on arrival, so hung and aborted ones too
	ByRoute     map[string]int64 // per route name (see Faults.Route); every name present
	InFlight    int64            // handlers running now
	MaxInFlight int64            // high-water mark of InFlight since the last ResetStats
}

// Record is a copy of one request as it reached the host.
type Record struct {
	Route, Path string // Route is "" for an unknown path
	Query       url.Values
	Header      http.Header
}

const recentSize = 256

type counters struct {
	requests    atomic.Int64
	byRoute     [numRoutes]atomic.Int64
	inFlight    atomic.Int64
	maxInFlight atomic.Int64

	mu     sync.Mutex
	recent [recentSize]Record
	next   int // ring position of the next record
	n      int // records held, at most recentSize
}

// arrive counts and records a request and marks it in flight. Counting on
// arrival rather than on completion means a test that has its answer sees
// it counted, and a hung request is counted too.
func (c *counters) arrive(rt route, r *http.Request) {
	rec := Record{Route: rt.String(), Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone()}
	// Recorded before it is counted: a reader that sees the count finds
	// the request among the recent ones (a test reads the last n records
	// for the n requests it counted).
	c.mu.Lock()
	c.recent[c.next] = rec
	c.next = (c.next + 1) % recentSize
	c.n = min(c.n+1, recentSize)
	c.mu.Unlock()
	if rt != routeNone {
		c.byRoute[rt].Add(1)
	}
	c.requests.Add(1)

	n := c.inFlight.Add(1)
	for {
		m := c.maxInFlight.Load()
		if n <= m || c.maxInFlight.CompareAndSwap(m, n) {
			return
		}
	}
}

func (c *counters) leave() { c.inFlight.Add(-1) }

// Stats returns a snapshot of the counters.
func (s *Sim) Stats() Stats {
	c := &s.stats
	st := Stats{
		Requests:    c.requests.Load(),
		ByRoute:     make(map[string]int64, numRoutes-1),
		InFlight:    c.inFlight.Load(),
		MaxInFlight: c.maxInFlight.Load(),
	}
	for rt := routeNone + 1; rt < numRoutes; rt++ {
		st.ByRoute[rt.String()] = c.byRoute[rt].Load()
	}
	return st
}

// ResetStats zeroes the counters and forgets Recent; MaxInFlight restarts
// from the requests in flight now.
func (s *Sim) ResetStats() {
	c := &s.stats
	c.requests.Store(0)
	for i := range c.byRoute {
		c.byRoute[i].Store(0)
	}
	c.maxInFlight.Store(c.inFlight.Load())
	c.mu.Lock()
	c.recent = [recentSize]Record{}
	c.next, c.n = 0, 0
	c.mu.Unlock()
}

// Recent returns copies of the last 256 requests, oldest first.
func (s *Sim) Recent() []Record {
	c := &s.stats
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Record, 0, c.n)
	for i := range c.n {
		r := c.recent[(c.next-c.n+i+recentSize)%recentSize]
		out = append(out, Record{Route: r.Route, Path: r.Path, Query: cloneValues(r.Query), Header: r.Header.Clone()})
	}
	return out
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}
