package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"tradergate/internal/testkit/redistest"
	"tradergate/legacysim"
	"tradergate/proxy"
	"tradergate/proxy/config"
)

// The fanout rows' subscribers against a real edge (in this process, with
// the configuration the harness renders for a fanout point) in front of
// a live simulated host: ten subscribers of one order book stream each
// get the same events, once and in order, the host's own events in
// ascending order.
func TestFanoutSubscribersGetEachEventOnceInOrder(t *testing.T) {
	const n = 10
	sim := legacysim.New(legacysim.Config{Seed: 1, Key: fanoutSimKey, History: time.Hour, Live: &legacysim.Live{BookEvery: 100 * time.Millisecond}})
	host := httptest.NewServer(sim)
	defer host.Close()
	addr := startFanoutTestEdge(t, host.URL, "", n, nil)
	token := sim.Markets()[0].Tokens[0]
	subs, rec := fanoutTestSubscribers(t, []string{addr}, nil, token, n, 3*time.Second)
	if got := rec.repeated.Load(); got != 0 {
		t.Errorf("%d events came twice or out of order", got)
	}
	checkFanoutEvents(t, subs, host.URL, token)
}

// The fleet mode (-fanout-replicas): three edges sharing a real Redis,
// with the configuration the harness renders for a fleet point, nine
// subscribers spread over them as the harness spreads them. Each
// subscriber gets the host's events once and in order, whichever replica
// it is on, and the host sees one poller's calls for the fleet.
func TestFanoutFleetSubscribersShareOnePoller(t *testing.T) {
	const replicas, n = 3, 9
	r := redistest.Start(t)
	sim := legacysim.New(legacysim.Config{Seed: 1, Key: fanoutSimKey, History: time.Hour, Live: &legacysim.Live{BookEvery: 100 * time.Millisecond}})
	host := httptest.NewServer(sim)
	defer host.Close()
	addrs := make([]string, replicas)
	for i := range addrs {
		addrs[i] = startFanoutTestEdge(t, host.URL, r.Addr(), n, nil)
	}
	token := sim.Markets()[0].Tokens[0]
	calls := func() int64 { return sim.Stats().ByRoute["orderbook_events"] }
	before := calls()
	start := time.Now()
	subs, rec := fanoutTestSubscribers(t, addrs, nil, token, n, 4*time.Second)
	perSec := float64(calls()-before) / time.Since(start).Seconds()
	if got := rec.repeated.Load(); got != 0 {
		t.Errorf("%d events came twice or out of order", got)
	}
	checkFanoutEvents(t, subs, host.URL, token)
	// One poller a second (streams.routes.orderbook_events.poll), and
	// each replica's opening reads (the stream's head, a catch-up page):
	// three pollers would make about 3/s.
	t.Logf("legacy calls of the stream: %.2f/s, %d subscribers over %d replicas", perSec, n, replicas)
	if perSec > 2.25 || perSec == 0 {
		t.Errorf("legacy calls: %.2f/s over %d replicas, want one poller's (about 1/s)", perSec, replicas)
	}
}

// The HTTP/2 subscribers (-fanout-h2): against an edge serving TLS as the
// harness configures it, streams sharing the client's connections get
// the same events, once and in order, over HTTP/2.
func TestFanoutH2Subscribers(t *testing.T) {
	const n = 5
	sim := legacysim.New(legacysim.Config{Seed: 1, Key: fanoutSimKey, History: time.Hour, Live: &legacysim.Live{BookEvery: 100 * time.Millisecond}})
	host := httptest.NewServer(sim)
	defer host.Close()
	cert, err := makeCert(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	addr := startFanoutTestEdge(t, host.URL, "", n, &cert)
	tc, err := tlsClientConfig(cert)
	if err != nil {
		t.Fatal(err)
	}
	tr := h2Transport(tc)
	defer tr.CloseIdleConnections()
	token := sim.Markets()[0].Tokens[0]
	subs, rec := fanoutTestSubscribers(t, []string{addr}, &http.Client{Transport: tr}, token, n, 3*time.Second)
	if got := rec.repeated.Load(); got != 0 {
		t.Errorf("%d events came twice or out of order", got)
	}
	checkFanoutEvents(t, subs, host.URL, token)
}

const fanoutSimKey, fanoutClientKey = "sim-key", "client-key"

// withCert serves TLS with cert, when given.
func (c tgConfig) withCert(cert *certFiles) tgConfig {
	if cert != nil {
		c.CertFile, c.KeyFile = cert.cert, cert.key
	}
	return c
}

// startFanoutTestEdge starts an edge in this process, configured as the
// harness configures a fanout point (with the fleet's Redis when
// redisAddr is set), in front of the host; it stops with the test.
func startFanoutTestEdge(t *testing.T, hostURL, redisAddr string, n int, cert *certFiles) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	// The admin listener on a port of its own, as the harness gives it:
	// the default one is the same for every replica.
	adminPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	data, err := renderTGConfig(tgConfig{Port: port, AdminPort: adminPort, Admin: true, UpstreamURL: hostURL + "/open-api", KeySHA256: hashKey(fanoutClientKey),
		CacheMaxBytes: defaultCacheBytes, Log: true, MaxConnections: n + 64, StreamsMaxPerKey: n, RedisAddr: redisAddr}.withCert(cert))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("max_per_key: "+strconv.Itoa(n))) {
		t.Fatalf("no streams.max_per_key in the fanout config:\n%s", data)
	}
	if redisAddr != "" && !bytes.Contains(data, []byte(redisAddr)) {
		t.Fatalf("no redis in the fleet's config:\n%s", data)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(func(k string) string {
		if k == "TRADERGATE_BENCH_UPSTREAM_KEY" {
			return fanoutSimKey
		}
		return ""
	}); err != nil {
		t.Fatal(err)
	}
	edge, err := proxy.New(cfg, proxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- edge.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("edge: %v", err)
		}
		_ = edge.Close()
	})
	return ln.Addr().String()
}

// fanoutTestSubscribers opens n streams of token, subscriber i on
// addrs[i mod len(addrs)] as the harness spreads them (over HTTP/2 with
// h2, else HTTP/1.1), reads them for d, and closes them.
func fanoutTestSubscribers(t *testing.T, addrs []string, h2 *http.Client, token string, n int, d time.Duration) ([]*sseSubscriber, *fanoutRecorder) {
	t.Helper()
	rec := &fanoutRecorder{}
	rec.measuring.Store(true)
	subs := make([]*sseSubscriber, n)
	var readers sync.WaitGroup
	defer func() {
		for _, s := range subs {
			if s != nil {
				s.close()
			}
		}
		readers.Wait()
	}()
	for i := range subs {
		path, header := "/v1/orderbook/stream?tokenId="+url.QueryEscape(token), map[string]string{"Authorization": "Bearer " + fanoutClientKey}
		var s *sseSubscriber
		var r *bufio.Reader
		var err error
		if h2 != nil {
			s, r, err = dialH2Subscriber(context.Background(), h2, "https://"+addrs[i%len(addrs)]+path, header, rec)
		} else {
			s, r, err = dialSubscriber(context.Background(), addrs[i%len(addrs)], path, header, rec)
		}
		if err != nil {
			t.Fatalf("subscriber %d: %v", i, err)
		}
		s.keep = true
		subs[i] = s
		readers.Go(func() { s.read(r) })
	}
	time.Sleep(d)
	rec.measuring.Store(false)
	return subs, rec
}

// checkFanoutEvents checks that every subscriber saw what the others did
// (but for the window's edges), and that those are the host's events of
// the token in ascending order, none missing.
func checkFanoutEvents(t *testing.T, subs []*sseSubscriber, hostURL, token string) {
	t.Helper()
	var lo, hi int64 = 0, 1<<63 - 1
	for i, s := range subs {
		if len(s.stamps) < 3 {
			t.Fatalf("subscriber %d got %d events, want several", i, len(s.stamps))
		}
		lo, hi = max(lo, s.stamps[0]), min(hi, s.stamps[len(s.stamps)-1])
	}
	common := func(st []int64) []int64 {
		return slices.DeleteFunc(slices.Clone(st), func(ts int64) bool { return ts < lo || ts > hi })
	}
	want := common(subs[0].stamps)
	for i, s := range subs[1:] {
		if got := common(s.stamps); !slices.Equal(got, want) {
			t.Errorf("subscriber %d got %v, subscriber 0 %v", i+1, got, want)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, hostURL+"/open-api/v1/orderbook/events?tokenId="+url.QueryEscape(token)+"&order=desc&limit=100", nil)
	req.Header.Set("Authorization", "Bearer "+fanoutSimKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Data struct {
			Items []struct {
				Timestamp int64 `json:"timestamp"`
			} `json:"items"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	var host0 []int64
	for _, it := range page.Data.Items {
		if it.Timestamp >= lo && it.Timestamp <= hi {
			host0 = append(host0, it.Timestamp)
		}
	}
	slices.Reverse(host0)
	if !slices.Equal(host0, want) {
		t.Errorf("subscribers got %v, the host's events are %v", want, host0)
	}
}

// The reader counts an event once per empty line after its data, skips
// data lines longer than its buffer without losing the next event, and
// counts an event whose timestamp does not follow the last as repeated.
func TestSSESubscriberRead(t *testing.T) {
	long := `data: {"cursor":"c","timestamp":3,"bids":"` + string(bytes.Repeat([]byte("x"), 10_000)) + `"}` + "\n"
	stream := "retry: 2000\n\n: heartbeat\n\nid: a\nevent: book\ndata: {\"timestamp\":1}\n\n" +
		"id: b\ndata: {\"timestamp\":2}\n\n" + "id: c\n" + long + "\n" + "id: b\ndata: {\"timestamp\":2}\n\n"
	rec := &fanoutRecorder{}
	rec.measuring.Store(true)
	s := &sseSubscriber{rec: rec, keep: true}
	s.read(bufioReader(stream))
	if !slices.Equal(s.stamps, []int64{1, 2, 3, 2}) || rec.events.Load() != 4 || rec.repeated.Load() != 1 {
		t.Errorf("stamps %v, events %d, repeated %d; want [1 2 3 2], 4, 1", s.stamps, rec.events.Load(), rec.repeated.Load())
	}
}

func bufioReader(s string) *bufio.Reader { return bufio.NewReaderSize(strings.NewReader(s), 2048) }

// -only fanout runs the fanout rows, and the other names the matrix;
// -fanout reads subscriber counts.
func TestFanoutFlags(t *testing.T) {
	for _, tc := range []struct {
		only, rest string
		ok         bool
	}{{"fanout", "", true}, {"hit, fanout ,miss", "hit,miss", true}, {"hit", "hit", false}, {"", "", false}, {"fanout-x", "fanout-x", false}} {
		if rest, ok := cutFanout(tc.only); rest != tc.rest || ok != tc.ok {
			t.Errorf("cutFanout(%q) = %q, %v; want %q, %v", tc.only, rest, ok, tc.rest, tc.ok)
		}
	}
	if n, err := fanoutSubscribers("1, 100,10000"); err != nil || !slices.Equal(n, []int{1, 100, 10000}) {
		t.Errorf("fanoutSubscribers: %v, %v", n, err)
	}
	for _, bad := range []string{"", "0", "10,x"} {
		if _, err := fanoutSubscribers(bad); err == nil {
			t.Errorf("fanoutSubscribers(%q) accepted", bad)
		}
	}
	if _, err := parseFlags([]string{"-fanout-window", "30s"}, io.Discard); err == nil {
		t.Error("a fanout window over 20s accepted")
	}
	if o, err := parseFlags([]string{"-fanout-replicas", "3"}, io.Discard); err != nil || o.fanoutReplicas != 3 {
		t.Errorf("-fanout-replicas 3: %v, %v", o.fanoutReplicas, err)
	}
	for _, bad := range []string{"0", "9"} {
		if _, err := parseFlags([]string{"-fanout-replicas", bad}, io.Discard); err == nil {
			t.Errorf("-fanout-replicas %s accepted", bad)
		}
	}
	if _, err := parseServers("tradergate,nchan"); err != nil {
		t.Errorf("-servers nchan: %v", err)
	}
}

// Nchan's nginx keeps more than worker_connections/16 slots free with
// every subscriber, the publisher and the listener connected: at or below
// that, nginx closes idle keep-alive connections (the publisher's) and
// accepted connections still waiting for their request (subscribers)
// to make room.
func TestNchanConfLeavesDrainHeadroom(t *testing.T) {
	for _, n := range []int{1, 100, 1000, 10000, 100000} {
		c := nchanConfFor(n)
		used := n + 1 + 1 + 8 // subscribers, publisher, listener, nginx's own pipes
		if free := c.Connections - used; free <= c.Connections/16 {
			t.Errorf("%d subscribers: worker_connections %d leaves %d free, at or below %d", n, c.Connections, free, c.Connections/16)
		}
		if c.Files <= c.Connections {
			t.Errorf("%d subscribers: worker_rlimit_nofile %d for %d connections", n, c.Files, c.Connections)
		}
		c.Module, c.Prefix, c.Listen = "/m.so", "/p", "127.0.0.1:1"
		var conf bytes.Buffer
		if err := template.Must(template.New("nchan").Parse(nchanConfTemplate)).Execute(&conf, c); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"worker_connections " + strconv.Itoa(c.Connections) + ";", "worker_rlimit_nofile " + strconv.Itoa(c.Files) + ";", "listen 127.0.0.1:1;"} {
			if !strings.Contains(conf.String(), want) {
				t.Errorf("%d subscribers: no %q in\n%s", n, want, conf.String())
			}
		}
	}
}
