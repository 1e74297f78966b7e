// Package stream serves the edge's server-sent event streams
// (docs/CONTRACT.md#streams): the order book events of a set of filters,
// and a trader's activity and transfers, as text/event-stream.
//
// Every subscriber of the same canonical stream (route, path parameter,
// canonical filters) on a replica shares one hub, whose poller reads the
// route's pages through the edge's page cache, as a client's request for
// the same page would be read, and keeps the stream's recent events for
// clients that reconnect with Last-Event-ID. With Redis, one replica per
// stream holds its poller by a lease and hands each poll's events to the
// others through Redis pub/sub (fleet.go); without, each replica polls
// for itself. A client's own backlog (a cursor, Last-Event-ID or from=
// older than the hub's events) is caught up from the same pages before
// the hub takes it over.
//
// The package knows no HTTP library: a front hands a subscriber its
// connection as a Sink (ConnSink for an HTTP/1.1 connection taken over
// from fasthttp; the edge's HTTP/2 front has its own).
package stream

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Options are a Manager's collaborators.
type Options struct {
	// Pages reads a route's page through the edge's cache. Required.
	Pages Pages
	// FreshTTL is a route's fresh TTL, the floor of its poll interval;
	// nil: no floor.
	FreshTTL func(route string) time.Duration
	// OpenTimeout bounds what opening a stream waits for (its first
	// read): the upstream timeout. Zero: 10s.
	OpenTimeout time.Duration
	// KeysVersion changes whenever the API keys are reloaded, and
	// KeyValid then reports whether the key with that SHA-256 may still
	// use the route; a stream whose key may not is ended (reason
	// key_revoked). nil: keys are never checked again.
	KeysVersion func() any
	KeyValid    func(key [32]byte, route string) bool
	// Redis is the fleet's shared client (proxy/fleet), RedisPrefix the
	// prefix of the stream's keys and channels (fleet's Key("stream")),
	// RedisTimeout the bound of one call. nil Redis: each replica polls
	// alone.
	Redis        redis.UniversalClient
	RedisPrefix  string
	RedisTimeout time.Duration
	// Registry receives the streams' metrics; nil: none registered.
	Registry prometheus.Registerer
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Logger; nil: discard.
	Logger *slog.Logger
}

// Manager holds a replica's streams.
type Manager struct {
	cfg     Config
	opt     Options
	now     func() time.Time
	log     *slog.Logger
	metrics *metrics
	relay   *relay // nil: no Redis

	mu       sync.Mutex
	hubs     map[string]*hub
	perKey   map[string]int
	subs     map[*Subscriber]struct{}
	draining bool

	wg     sync.WaitGroup // subscribers' catch-ups
	ctx    context.Context
	cancel context.CancelFunc
	loops  sync.WaitGroup // the janitor and the hubs
	// stopOnce stops the goroutines, once (Shutdown, Close).
	stopOnce sync.Once
}

// New starts a Manager; Shutdown stops it.
func New(cfg Config, opt Options) (*Manager, error) {
	cfg.ApplyDefaults()
	if opt.Pages == nil {
		return nil, errors.New("stream: Options.Pages is required")
	}
	m := &Manager{
		cfg: cfg, opt: opt, now: opt.Now, log: opt.Logger,
		hubs: map[string]*hub{}, perKey: map[string]int{}, subs: map[*Subscriber]struct{}{},
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.opt.OpenTimeout <= 0 {
		m.opt.OpenTimeout = 10 * time.Second
	}
	var err error
	if m.metrics, err = newMetrics(opt.Registry, m); err != nil {
		return nil, err
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	if opt.Redis != nil {
		m.relay = newRelay(m, opt.Redis, opt.RedisPrefix, opt.RedisTimeout)
	}
	m.loops.Add(1)
	go m.janitor()
	return m, nil
}

// Request is the stream a client asks for, validated by the edge.
type Request struct {
	// Route is the streamed route (RouteOrderBook, RouteActivity,
	// RouteTransfers); PathParam the trader's address.
	Route, PathParam string
	// Filters are the canonical filters as query parameters, each
	// "&name=value" with the value escaped, in the route's order.
	Filters string
	// KeyID names the client's key; Key is its SHA-256.
	KeyID string
	Key   [32]byte
	// Start is where the stream begins: after an event (a cursor or
	// Last-Event-ID), from a time (from=), or, zero, from now.
	Start Pos
}

// TooManyError refuses a stream past streams.max_per_key.
type TooManyError struct{ Max int }

func (e *TooManyError) Error() string {
	return "Too many open streams for this API key: at most " + strconv.Itoa(e.Max)
}

// ErrShuttingDown refuses a stream while the replica stops.
var ErrShuttingDown = errors.New("stream: shutting down")

// ErrBadID refuses a Last-Event-ID that no event of the stream has.
var ErrBadID = errors.New("stream: invalid Last-Event-ID")

// Valid reports whether id could be an event id of route's streams.
func Valid(route, id string) bool {
	if route == RouteOrderBook {
		return validID(id)
	}
	_, ok := parseKey(id)
	return ok
}

// key is the canonical stream of r.
func (r *Request) key() string { return r.Route + " " + r.PathParam + "?" + r.Filters }

func (m *Manager) source(r *Request) source {
	count := func(fetched bool) { m.metrics.read(r.Route, fetched) }
	switch r.Route {
	case RouteOrderBook:
		return &bookSource{pages: m.opt.Pages, filters: strings.TrimPrefix(r.Filters, "&"), now: m.now, count: count}
	case RouteTransfers:
		return &listSource{pages: m.opt.Pages, route: r.Route, addr: r.PathParam, filters: r.Filters, typ: "transfer", now: m.now, count: count, maxPages: 10}
	}
	return &listSource{pages: m.opt.Pages, route: r.Route, addr: r.PathParam, filters: r.Filters, typ: "activity", now: m.now, count: count, maxPages: 10}
}

// Open prepares the stream r asks for: it counts it against the key's
// cap, joins (or starts) its hub, waits until the hub knows where the
// stream stands, and reads the first page of a stream that starts before
// the hub's events, so that a request the pages refuse is answered as
// that error. The front then calls Start with the connection, or
// Abandon.
func (m *Manager) Open(ctx context.Context, r Request) (*Subscriber, error) {
	if r.Start.ID != "" && !Valid(r.Route, r.Start.ID) {
		return nil, ErrBadID
	}
	key := r.key()
	m.mu.Lock()
	if m.draining {
		m.mu.Unlock()
		return nil, ErrShuttingDown
	}
	if m.perKey[r.KeyID] >= m.cfg.MaxPerKey {
		m.mu.Unlock()
		return nil, &TooManyError{Max: m.cfg.MaxPerKey}
	}
	h := m.hubs[key]
	if h == nil {
		h = newHub(m, key, r.Route, m.source(&r))
		m.hubs[key] = h
		hctx, cancel := context.WithCancel(m.ctx)
		h.cancel = cancel
		m.loops.Add(1)
		go func() {
			defer m.loops.Done()
			h.run(hctx)
		}()
	}
	h.refs++
	m.perKey[r.KeyID]++
	s := &Subscriber{
		m: m, h: h, route: r.Route, keyID: r.KeyID, key: r.Key, start: r.Start,
		budget: m.cfg.BufferBytes, drained: make(chan struct{}, 1), done: make(chan struct{}),
		gone: make(chan struct{}), opened: m.now(),
	}
	s.ctx, s.cancel = context.WithCancel(m.ctx)
	m.subs[s] = struct{}{}
	m.mu.Unlock()
	m.metrics.opened(r.Route)

	octx, cancel := context.WithTimeout(ctx, m.opt.OpenTimeout)
	defer cancel()
	if err := h.waitReady(octx); err != nil {
		s.finish(ReasonClientClosed, false)
		return nil, err
	}
	pos := r.Start
	if pos.ID == "" && !pos.HasFrom {
		// From now: after the hub's newest event as the stream opens
		// (events that arrive before Start are caught up from the ring).
		h.mu.Lock()
		if len(h.ring) > 0 {
			pos = Pos{ID: h.ring[len(h.ring)-1].ID}
		} else {
			pos = h.head
		}
		h.mu.Unlock()
		s.prePos = pos
		return s, nil
	}
	if _, in := h.has(pos.ID); in && pos.ID != "" {
		s.prePos = pos
		return s, nil
	}
	evs, next, _, err := h.src.read(octx, pos)
	if err != nil {
		s.finish(ReasonClientClosed, false)
		return nil, err
	}
	s.pre, s.prePos = evs, next
	return s, nil
}

// release is a subscriber's end, once: its key's count, its hub's, the
// metrics.
func (m *Manager) release(s *Subscriber, r Reason) {
	m.mu.Lock()
	delete(m.subs, s)
	if m.perKey[s.keyID]--; m.perKey[s.keyID] <= 0 {
		delete(m.perKey, s.keyID)
	}
	if h := s.h; h != nil {
		if h.refs--; h.refs == 0 {
			h.idleSince = m.now()
		}
	}
	m.mu.Unlock()
	m.metrics.ended(s.route, r)
}

// pollInterval is a route's poll interval, never below its fresh TTL.
func (m *Manager) pollInterval(route string) time.Duration {
	d := m.cfg.Routes[route].Poll
	if m.opt.FreshTTL != nil {
		d = max(d, m.opt.FreshTTL(route))
	}
	return max(d, 10*time.Millisecond)
}

// logReadFailed notes a poll or head read that failed; the poller tries
// again at its next interval.
func (m *Manager) logReadFailed(h *hub, err error) {
	m.metrics.readFailed(h.route)
	m.log.Debug("stream: a read failed; retried at the next poll", "route", h.route, "err", err)
}

// startWithin is how long a front may take to start a stream it was
// given, past the open timeout.
const startWithin = 10 * time.Second

// janitorEvery is how often heartbeats, idle hubs and reloaded keys are
// looked at.
const janitorEvery = time.Second

// janitor sends heartbeats, ends the streams of keys a reload removed,
// and stops hubs idle past streams.linger.
func (m *Manager) janitor() {
	defer m.loops.Done()
	t := time.NewTicker(janitorEvery)
	defer t.Stop()
	var keys any
	if m.opt.KeysVersion != nil {
		keys = m.opt.KeysVersion()
	}
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		now := m.now()
		m.mu.Lock()
		subs := make([]*Subscriber, 0, len(m.subs))
		for s := range m.subs {
			subs = append(subs, s)
		}
		var idle []*hub
		for k, h := range m.hubs {
			if h.refs == 0 && now.Sub(h.idleSince) >= m.cfg.Linger {
				delete(m.hubs, k)
				idle = append(idle, h)
			}
		}
		m.mu.Unlock()
		for _, h := range idle {
			h.cancel()
		}
		check := false
		if m.opt.KeysVersion != nil {
			if v := m.opt.KeysVersion(); v != keys {
				keys, check = v, true
			}
		}
		for _, s := range subs {
			if check && m.opt.KeyValid != nil && !m.opt.KeyValid(s.key, s.route) {
				s.end(ReasonKeyRevoked)
				continue
			}
			s.mu.Lock()
			started := s.sink != nil
			s.mu.Unlock()
			if !started && now.Sub(s.opened) > m.opt.OpenTimeout+startWithin {
				s.Abandon() // its front never took the connection
				continue
			}
			s.heartbeat(now, m.cfg.Heartbeat)
		}
	}
}

// Close stops the manager at once: Shutdown with no time to drain.
func (m *Manager) Close() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = m.Shutdown(ctx)
}

// Shutdown ends every stream with a retry hint and the reason
// shutting_down, refuses new ones, and waits until each has gone (or ctx
// ends, when what is left is cut off); then it stops the hubs, releasing
// their leases.
func (m *Manager) Shutdown(ctx context.Context) error {
	m.mu.Lock()
	m.draining = true
	subs := make([]*Subscriber, 0, len(m.subs))
	for s := range m.subs {
		subs = append(subs, s)
	}
	m.mu.Unlock()
	for _, s := range subs {
		s.end(ReasonShuttingDown)
	}
	var err error
	for _, s := range subs {
		// A stream that started is over once its connection has sent the
		// last event and closed.
		s.mu.Lock()
		sink := s.sink
		s.mu.Unlock()
		over := s.done
		if sink != nil {
			over = s.gone
		}
		select {
		case <-over:
			continue
		case <-ctx.Done():
		}
		err = ctx.Err()
		if sink != nil {
			sink.Cut() // past the drain time
		}
	}
	m.stopOnce.Do(func() {
		m.cancel()
		m.wg.Wait()
		m.loops.Wait()
		if m.relay != nil {
			m.relay.close()
		}
	})
	return err
}

// counts are the figures of the open streams by route: streams,
// streams with a hub, the most subscribers of one hub, and hubs this
// replica polls for.
func (m *Manager) counts() (open, hubs, most, leading map[string]int) {
	open, hubs, most, leading = map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	m.mu.Lock()
	for s := range m.subs {
		open[s.route]++
	}
	all := make([]*hub, 0, len(m.hubs))
	for _, h := range m.hubs {
		all = append(all, h)
		if h.refs > 0 {
			hubs[h.route]++
			most[h.route] = max(most[h.route], h.refs)
		}
	}
	m.mu.Unlock()
	// A hub's lock is never taken under the manager's.
	for _, h := range all {
		if h.isLeading() {
			leading[h.route]++
		}
	}
	return open, hubs, most, leading
}

// OpenStreams is the number of open streams by route.
func (m *Manager) OpenStreams() map[string]int {
	open, _, _, _ := m.counts()
	return open
}

func (h *hub) isLeading() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.leading
}

// FilterQuery makes Request.Filters from canonical values: "&name=value"
// for each non-empty value, list items escaped and joined by commas.
func FilterQuery(pairs ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			continue
		}
		b.WriteString("&" + pairs[i] + "=")
		for j, item := range strings.Split(pairs[i+1], ",") {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(url.QueryEscape(item))
		}
	}
	return b.String()
}
