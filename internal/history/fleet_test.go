package history

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"golang.org/x/net/http2"

	"tradergate/cache"
	"tradergate/internal/testkit"
	"tradergate/internal/testkit/redistest"
	"tradergate/legacysim"
	"tradergate/normalize"
	"tradergate/proxy"
	"tradergate/proxy/config"
	"tradergate/proxy/orderbook"
	"tradergate/proxy/route"
)

// The fleet a history is recorded on: three replicas of the edge on
// loopback, in process, sharing one legacy host (legacysim, live, with
// its journal) and one real Redis reached through Toxiproxy (so that it
// can be cut off). Replica 0 listens in plain HTTP/1.1 (fasthttp, page
// files); replicas 1 and 2 on TLS, where clients speak HTTP/1.1 or
// HTTP/2.

const (
	clientKey = "history-client-key-0123456789"
	legacyKey = "history-legacy-key"
	edgeName  = "edge.test"
	replicas  = 3
)

// timing is what the run's clocks are set to. The edge takes a fetch
// slower than cache.stale_after for a failing host (it serves the held
// page, up to stale_if_error old), and under the race detector the
// fleet, the legacy host and the clients all run about six times slower
// on the same CPUs: there stale_after and upstream.timeout are longer,
// and the slow fault slower, so that the machine's slowness does not pass
// for a fault and the fault still is one.
type timing struct {
	staleAfter, upstreamTimeout, slow time.Duration
}

func runTiming() timing {
	if raceEnabled {
		return timing{staleAfter: 3 * time.Second, upstreamTimeout: 6 * time.Second, slow: 3500 * time.Millisecond}
	}
	return timing{staleAfter: 500 * time.Millisecond, upstreamTimeout: 2 * time.Second, slow: 700 * time.Millisecond}
}

// tails are the faults' tails under the run's configuration: the route
// breaker's open_timeout (5s) and two attempts of upstream.timeout, and
// the shared Redis breaker's time open.
func (tm timing) tails() Tails {
	return Tails{Legacy: 5*time.Second + 2*tm.upstreamTimeout + time.Second, Redis: 6 * time.Second}
}

// simConfig is the legacy host's data: live, so that first pages change
// every second or so while pages named by a cursor do not.
func simConfig(end time.Time) legacysim.Config {
	return legacysim.Config{Seed: 11, Key: legacyKey, End: end, Journal: true,
		Live: &legacysim.Live{BookEvery: 250 * time.Millisecond, TradeEvery: 2 * time.Second, TransferEvery: 15 * time.Second}}
}

type fleet struct {
	t        *testing.T
	sim      *legacysim.Sim
	twin     *legacysim.Sim // the same data without a journal: the truth of books at T
	up       *httptest.Server
	redis    *redistest.Server
	redisX   *toxiproxy.Proxy // between the replicas and Redis
	certFile string
	keyFile  string
	pool     *tls.Config
	reps     [replicas]*replica
	timeline *Timeline
	rec      *Recorder

	mu        sync.Mutex
	longTTL   bool // the reload's cache policy is in force
	epochs    []Epoch
	deny      map[int]bool // replicas started with on_store_error: deny
	transport [replicas]map[Front]http.RoundTripper
	subs      []Subscription // what the last run's subscribers saw
}

// replica is one edge; a restart replaces srv, on the same address.
type replica struct {
	idx    int
	tls    bool
	addr   string
	logs   testkit.LogBuffer // every run of the replica
	srv    *proxy.Server
	cancel context.CancelFunc
	done   chan error
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	end := time.Now().Truncate(time.Second)
	f := &fleet{t: t, timeline: &Timeline{}, rec: NewRecorder("h"), deny: map[int]bool{}}
	f.sim = legacysim.New(simConfig(end))
	twinCfg := simConfig(end)
	twinCfg.Journal = false
	f.twin = legacysim.New(twinCfg)
	f.up = httptest.NewServer(f.sim)
	t.Cleanup(f.up.Close)

	f.redis = redistest.Start(t)
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	f.redisX = toxiproxy.NewProxy(srv, "redis", "127.0.0.1:0", f.redis.Addr())
	if err := f.redisX.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.redisX.Stop)

	dir := t.TempDir()
	f.certFile, f.keyFile = filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key")
	kp := testkit.SelfSigned(t, edgeName, time.Now().Add(24*time.Hour), edgeName)
	kp.Write(t, f.certFile, f.keyFile)
	f.pool = &tls.Config{RootCAs: kp.Pool(), ServerName: edgeName}

	for i := range f.reps {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r := &replica{idx: i, tls: i > 0, addr: ln.Addr().String()}
		f.reps[i] = r
		f.start(r, ln)
		f.transport[i] = f.transports(r)
	}
	f.epoch(time.Time{})
	t.Cleanup(func() {
		for _, r := range f.reps {
			f.stop(r)
		}
		for _, ts := range f.transport {
			for _, rt := range ts {
				switch tr := rt.(type) {
				case *http.Transport:
					tr.CloseIdleConnections()
				case *http2.Transport:
					tr.CloseIdleConnections()
				}
			}
		}
	})
	return f
}

// config is a replica's configuration: a small page cache (so that pages
// are evicted and fetched again), Redis shared, a key whose allowance no
// run spends, and the reload's TTLs once it happened.
func (f *fleet) config(r *replica) *config.Config {
	f.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "server:\n  listen: %q\n  shutdown_timeout: 200ms\n", r.addr)
	if r.tls {
		fmt.Fprintf(&b, "  tls: {mode: files, cert_file: %q, key_file: %q, http_listen: \"\"}\n", f.certFile, f.keyFile)
	}
	fmt.Fprintf(&b, "admin: {listen: \"off\"}\n")
	tm := runTiming()
	fmt.Fprintf(&b, "upstream:\n  base_url: %q\n  timeout: %s\n  per_second: 20000\n  retry: {max_attempts: 2}\n", f.up.URL+"/open-api", tm.upstreamTimeout)
	fmt.Fprintf(&b, "keys:\n  - {id: history, sha256: %q, plan: big, routes: [\"*\"]}\n", proxy.HashKey(clientKey))
	fmt.Fprintf(&b, "plans:\n  big: {requests: 1000000000, window: 1m}\n")
	onErr := "allow"
	f.mu.Lock()
	deny, longTTL := f.deny[r.idx], f.longTTL
	f.mu.Unlock()
	if deny {
		onErr = "deny"
	}
	fmt.Fprintf(&b, "limits: {on_store_error: %s}\n", onErr)
	// redis.timeout 250ms rather than 50ms: a replica that denies on a
	// store error must not deny for a loaded machine's slow call.
	fmt.Fprintf(&b, "redis: {addrs: [%q], timeout: 250ms}\n", f.redisX.Listen)
	// Heartbeats every second, so that a subscriber tells a dead stream
	// from a quiet one within a few (streamSilence).
	fmt.Fprintf(&b, "streams: {heartbeat: 1s}\n")
	fmt.Fprintf(&b, "cache:\n  max_bytes: 1048576\n  sendfile_min_bytes: 16384\n  sendfile_dir: %q\n  stale_after: %s\n", os.TempDir(), tm.staleAfter)
	if longTTL {
		fmt.Fprintf(&b, "  routes:\n    activity: {fresh_ttl: 3s}\n    orderbook_events: {fresh_ttl: 3s, stale_while_revalidate: 2s}\n")
	}
	cfg, err := config.Parse([]byte(b.String()))
	if err != nil {
		f.t.Fatalf("%v\n%s", err, b.String())
	}
	if err := cfg.Validate(func(k string) string {
		if k == "TRADERGATE_UPSTREAM_KEY" {
			return legacyKey
		}
		return ""
	}); err != nil {
		f.t.Fatal(err)
	}
	return cfg
}

// epoch records the cache policy that is in force from from.
func (f *fleet) epoch(from time.Time) {
	cfg := f.config(f.reps[0])
	c := cfg.Cache
	c.ApplyDefaults()
	ep := Epoch{From: from, Routes: map[string]Bounds{}}
	for _, name := range route.Names() {
		p := c.Policy
		if rp, ok := c.Routes[name]; ok {
			p = rp
		}
		ep.Routes[name] = bounds(p)
	}
	f.mu.Lock()
	f.epochs = append(f.epochs, ep)
	f.mu.Unlock()
}

func bounds(p cache.Policy) Bounds {
	return Bounds{Fresh: p.FreshTTL, Negative: p.NegativeTTL, Immutable: p.ImmutableTTL,
		SWR: max(p.StaleWhileRevalidate, 0), SIE: max(p.StaleIfError, 0)}
}

// start runs a replica on ln.
func (f *fleet) start(r *replica, ln net.Listener) {
	f.t.Helper()
	srv, err := proxy.New(f.config(r), proxy.Options{
		Logger:    slog.New(slog.NewJSONHandler(&r.logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		AccessLog: true,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.srv, r.cancel, r.done = srv, cancel, make(chan error, 1)
	go func() { r.done <- srv.Serve(ctx, ln) }()
}

// stop ends a replica: a drain of 200ms (server.shutdown_timeout), as a
// pod is killed past its grace period, then everything it held is gone.
func (f *fleet) stop(r *replica) {
	if r.srv == nil {
		return
	}
	r.cancel()
	<-r.done
	_ = r.srv.Close()
	r.srv = nil
}

// restart stops a replica and starts it again on its address, with the
// configuration as it is now.
func (f *fleet) restart(r *replica, down time.Duration) {
	f.t.Helper()
	end := f.timeline.Begin(ReplicaDown, r.idx)
	defer end()
	f.stop(r)
	time.Sleep(down)
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		f.t.Fatalf("replica %d: listen again on %s: %v", r.idx, r.addr, err)
	}
	f.start(r, ln)
}

// setDeny sets the mode a replica starts in next: on_store_error deny or
// allow.
func (f *fleet) setDeny(i int, deny bool) {
	f.mu.Lock()
	f.deny[i] = deny
	f.mu.Unlock()
}

// reload gives every replica the reload's cache policy, as SIGHUP does.
func (f *fleet) reload() {
	f.t.Helper()
	from := time.Now() // the first replica stores pages by the new policy from here
	f.mu.Lock()
	f.longTTL = true
	f.mu.Unlock()
	for _, r := range f.reps {
		if err := r.srv.Reload(f.config(r)); err != nil {
			f.t.Fatal(err)
		}
	}
	f.epoch(from)
}

// transports are the clients of a replica, by front. None decompresses
// by itself (the recorder does).
func (f *fleet) transports(r *replica) map[Front]http.RoundTripper {
	if !r.tls {
		return map[Front]http.RoundTripper{H1: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	}
	h1 := f.pool.Clone()
	h1.NextProtos = []string{"http/1.1"}
	return map[Front]http.RoundTripper{
		H1TLS: &http.Transport{TLSClientConfig: h1, MaxIdleConnsPerHost: 64, DisableCompression: true},
		H2:    &http2.Transport{TLSClientConfig: f.pool.Clone(), DisableCompression: true},
	}
}

// base is the scheme and host of a replica.
func (r *replica) base() string {
	if r.tls {
		return "https://" + r.addr
	}
	return "http://" + r.addr
}

// logs returns what replica i logged about a request: the lines naming
// its id, and warnings and errors from a second before to a second after.
func (f *fleet) logs(i int, id string, from, to time.Time) []string {
	var out []string
	for l := range strings.SplitSeq(f.reps[i].logs.String(), "\n") {
		if l == "" {
			continue
		}
		if strings.Contains(l, `"request_id":"`+id+`"`) {
			out = append(out, l)
			continue
		}
		if !strings.Contains(l, `"level":"WARN"`) && !strings.Contains(l, `"level":"ERROR"`) {
			continue
		}
		var rec struct {
			Time time.Time `json:"time"`
		}
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Time.After(from.Add(-time.Second)) && rec.Time.Before(to.Add(time.Second)) {
			out = append(out, l)
		}
		if len(out) > 12 {
			break
		}
	}
	return out
}

// bookTruth is the order book at T as the edge must answer it: the edge's
// own rebuild (proxy/orderbook) over the twin's events pages, rewritten by
// the edge's rewrite. The twin holds the same data as the legacy host; a
// settled T has no event after the run began, so the instant it is asked
// at does not matter.
func (f *fleet) bookTruth(tokenID string, at int64, depth int) (string, error) {
	events := route.NewTable().ByName(route.OrderBookEvents)
	fetch := func(_ context.Context, q orderbook.Query) ([]byte, error) {
		v := url.Values{"tokenId": {q.TokenID}, "eventType": {q.EventType}, "order": {q.Order},
			"to": {strconv.FormatInt(q.To, 10)}, "limit": {strconv.Itoa(q.Limit)}}
		if q.Cursor != "" {
			v.Set("cursor", q.Cursor)
		}
		req := httptest.NewRequest(http.MethodGet, "/open-api/v1/orderbook/events?"+v.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+legacyKey)
		w := httptest.NewRecorder()
		f.twin.ServeHTTP(w, req)
		out, _, err := normalize.Rewrite(nil, w.Body.Bytes(), normalize.Options{Shape: events.Shape, ShiftCents: true, TimeField: events.TimeField})
		return out, err
	}
	book, err := orderbook.Rebuild(context.Background(), fetch, tokenID, at, orderbook.Options{Depth: depth})
	if err != nil {
		return "", err
	}
	body := append([]byte(normalize.SuccessPrefix), book.AppendJSON(nil)...)
	return string(append(body, '}')), nil
}

// checker is the checker of the fleet's history.
func (f *fleet) checker(phases []string) *Checker {
	f.mu.Lock()
	defer f.mu.Unlock()
	routes := route.NewTable()
	return &Checker{
		Routes: routes,
		Truth:  NewTruth(routes, f.sim.Journal(), true),
		Book:   f.bookTruth,
		Epochs: append([]Epoch(nil), f.epochs...),
		Faults: f.timeline.Faults(),
		Tails:  runTiming().tails(),
		// Under the race detector a fetch can outlast stale_after with
		// no fault at all (the fleet, the legacy host and the clients
		// share two CPUs, six times slower): there the stale bound is
		// stale_if_error throughout, and the run without it holds the
		// strict one.
		SlowFetches: raceEnabled,
		Logs:        f.logs,
		Slack:       750 * time.Millisecond,
		Phases:      phases,
		Streams:     f.streamTruth,
		StreamSlack: streamSlack(),
		StreamTail:  5 * time.Second,                 // streams.lease, its default
		Fetch:       2 * runTiming().upstreamTimeout, // upstream.retry.max_attempts 2
	}
}
