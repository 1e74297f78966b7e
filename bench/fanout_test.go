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
	"strings"
	"sync"
	"testing"
	"time"

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
	const simKey, clientKey, n = "sim-key", "client-key", 10
	sim := legacysim.New(legacysim.Config{Seed: 1, Key: simKey, History: time.Hour, Live: &legacysim.Live{BookEvery: 100 * time.Millisecond}})
	host := httptest.NewServer(sim)
	defer host.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	data, err := renderTGConfig(tgConfig{Port: port, UpstreamURL: host.URL + "/open-api", KeySHA256: hashKey(clientKey),
		CacheMaxBytes: defaultCacheBytes, Log: true, MaxConnections: n + 64, StreamsMaxPerKey: n})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("max_per_key: 10")) {
		t.Fatalf("no streams.max_per_key in the fanout config:\n%s", data)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(func(k string) string {
		if k == "TRADERGATE_BENCH_UPSTREAM_KEY" {
			return simKey
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
	defer func() {
		cancel()
		<-served
		_ = edge.Close()
	}()

	token := sim.Markets()[0].Tokens[0]
	rec := &fanoutRecorder{}
	rec.measuring.Store(true)
	subs := make([]*sseSubscriber, n)
	var readers sync.WaitGroup
	for i := range subs {
		s, r, err := dialSubscriber(ctx, ln.Addr().String(), "/v1/orderbook/stream?tokenId="+url.QueryEscape(token),
			map[string]string{"Authorization": "Bearer " + clientKey}, rec)
		if err != nil {
			t.Fatalf("subscriber %d: %v", i, err)
		}
		s.keep = true
		subs[i] = s
		readers.Go(func() { s.read(r) })
	}
	time.Sleep(3 * time.Second)
	rec.measuring.Store(false)
	for _, s := range subs {
		s.conn.Close()
	}
	readers.Wait()

	if got := rec.repeated.Load(); got != 0 {
		t.Errorf("%d events came twice or out of order", got)
	}
	// Each subscriber saw what the others did, but for the window's
	// edges: compare on the events all of them saw.
	var lo, hi int64 = 0, 1<<63 - 1
	for i, s := range subs {
		if len(s.stamps) < 3 {
			t.Fatalf("subscriber %d got %d events in 3s, want several", i, len(s.stamps))
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
	// They are the host's events of the token, in ascending order, none
	// missing.
	req, _ := http.NewRequest(http.MethodGet, host.URL+"/open-api/v1/orderbook/events?tokenId="+url.QueryEscape(token)+"&order=desc&limit=100", nil)
	req.Header.Set("Authorization", "Bearer "+simKey)
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
	if _, err := parseServers("tradergate,nchan"); err != nil {
		t.Errorf("-servers nchan: %v", err)
	}
}
