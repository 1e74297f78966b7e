package proxy_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"tradergate/internal/testkit"
	"tradergate/legacysim"
	"tradergate/proxy/config"
)

func TestCoalescing(t *testing.T) {
	gate := make(chan struct{})
	// A clock that does not move: on a loaded machine the test can take
	// longer than the page's 1s TTL, and the last check is a hit.
	clk := testkit.NewClock(time.Now())
	e := newEdge(t, withClock(clk.Now), withUpstream(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-gate // hold the legacy call until every client waits on it
			next.ServeHTTP(w, r)
		})
	}))
	path := "/v1/trader/" + e.sim.Wallets()[0] + "/activity"

	// One client gives up while the shared fetch is running. It comes
	// through the net/http front (the one HTTP/2 clients reach), which
	// learns that a client left; fasthttp, the HTTP/1.1 front, only learns
	// it when it writes the answer (README "Running it for real").
	std := httptest.NewServer(e.srv.Handler())
	t.Cleanup(std.Close)
	leaver, leave := context.WithCancel(context.Background())
	leaverDone := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(leaver, http.MethodGet, std.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+keyAll)
		resp, err := std.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		leaverDone <- err
	}()
	testkit.Eventually(t, "the leaving client to wait", func() bool { return e.srv.CacheStats().Waiting == 1 })

	const n = 100
	var wg sync.WaitGroup
	bodies := make([][]byte, n)
	statuses := make([]int, n)
	for i := range n {
		wg.Go(func() {
			resp, body := e.get(path)
			bodies[i], statuses[i] = body, resp.StatusCode
		})
	}
	testkit.Eventually(t, "all clients to join the flight", func() bool { return e.srv.CacheStats().Waiting == n+1 })
	leave()
	if err := <-leaverDone; err == nil {
		t.Error("the leaving client got an answer")
	}
	testkit.Eventually(t, "the leaving client to stop waiting", func() bool { return e.srv.CacheStats().Waiting == n })
	close(gate)
	wg.Wait()

	if got := e.sim.Stats().Requests; got != 1 {
		t.Errorf("legacy host saw %d requests, want 1", got)
	}
	for i := range n {
		if statuses[i] != 200 || !bytes.Equal(bodies[i], bodies[0]) {
			t.Fatalf("client %d: %d %.100s", i, statuses[i], bodies[i])
		}
	}
	st := e.srv.CacheStats()
	if st.Coalesced < n-1 || st.Fetches != 1 {
		t.Errorf("coalesced %d, fetches %d", st.Coalesced, st.Fetches)
	}
	// The flight is over: the page is held and the next request is a hit.
	resp, _ := e.get(path)
	if got := resp.Header.Get("X-Cache"); got != "HIT" {
		t.Errorf("after the flight: X-Cache %q", got)
	}
}

// A miss on the HTTP/1.1 front runs its flight on the request's own
// goroutine, since its context ends only with the edge's drain
// (wire.Shared, cache.Options.Inline); one whose request can end on its
// own, as net/http's can, hands its flight to a runner.
func TestHTTP1MissFliesInline(t *testing.T) {
	e := newEdge(t)
	resp, body := e.get(activity(e, 0))
	if resp.StatusCode != 200 || resp.Header.Get("X-Cache") != "MISS" {
		t.Fatalf("%d %s %.100s", resp.StatusCode, resp.Header.Get("X-Cache"), body)
	}
	if st := e.srv.CacheStats(); st.Runners != 0 || st.Fetches != 1 {
		t.Fatalf("after an HTTP/1.1 miss: %d flight runners, %d fetches; want 0 and 1", st.Runners, st.Fetches)
	}
	std := httptest.NewServer(e.srv.Handler())
	t.Cleanup(std.Close)
	req, _ := http.NewRequest(http.MethodGet, std.URL+activity(e, 1), nil)
	req.Header.Set("Authorization", "Bearer "+keyAll)
	resp, err := std.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if st := e.srv.CacheStats(); resp.StatusCode != 200 || st.Runners != 1 || st.Fetches != 2 {
		t.Fatalf("after a miss through net/http: %d, %d flight runners, %d fetches; want 200, 1 and 2", resp.StatusCode, st.Runners, st.Fetches)
	}
}

func TestFreshnessAndStaleWhileRevalidate(t *testing.T) {
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	edgeClock, simClock := testkit.NewClock(base), testkit.NewClock(base)
	e := newEdge(t, withClock(edgeClock.Now),
		withSim(legacysim.Config{Seed: 7, Now: simClock.Now, End: base.Add(24 * time.Hour)}))
	path := "/v1/trader/" + e.sim.Wallets()[0] + "/activity?limit=5"

	resp, first := e.get(path)
	if x := resp.Header.Get("X-Cache"); x != "MISS" || resp.StatusCode != 200 {
		t.Fatalf("first: %d %s", resp.StatusCode, x)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "private, max-age=1" {
		t.Errorf("first page Cache-Control %q, want a fresh one", cc)
	}

	edgeClock.Advance(500 * time.Millisecond) // inside fresh_ttl (1s)
	resp, body := e.get(path)
	if x := resp.Header.Get("X-Cache"); x != "HIT" || !bytes.Equal(body, first) {
		t.Errorf("within TTL: %s", x)
	}

	simClock.Advance(12 * time.Hour)   // the legacy host has new trades now
	edgeClock.Advance(1 * time.Second) // 1.5s: past TTL, inside stale_while_revalidate (1s)
	resp, body = e.get(path)
	if x := resp.Header.Get("X-Cache"); x != "STALE" || !bytes.Equal(body, first) {
		t.Errorf("inside stale_while_revalidate: %s", x)
	}
	if got := resp.Header.Get("Age"); got != "1" {
		t.Errorf("Age = %q, want 1", got)
	}
	// One background refresh, however many stale hits.
	e.get(path)
	testkit.Eventually(t, "the background refresh", func() bool { return e.sim.Stats().Requests == 2 })
	testkit.Eventually(t, "the refreshed page to land", func() bool {
		resp, body := e.get(path)
		return resp.Header.Get("X-Cache") == "HIT" && !bytes.Equal(body, first)
	})
	if got := e.srv.CacheStats().Refreshes; got != 1 {
		t.Errorf("refreshes = %d, want 1", got)
	}

	// Past TTL plus the stale window the old page is never served again.
	simClock.Advance(6 * time.Hour)
	_, refreshed := e.get(path)
	edgeClock.Advance(2*time.Second + time.Millisecond)
	resp, body = e.get(path)
	if x := resp.Header.Get("X-Cache"); x != "MISS" || bytes.Equal(body, refreshed) {
		t.Errorf("past TTL+stale_while_revalidate: %s, changed %v", x, !bytes.Equal(body, refreshed))
	}
}

func TestStaleIfError(t *testing.T) {
	base := time.Now()
	edgeClock := testkit.NewClock(base)
	e := newEdge(t, withClock(edgeClock.Now))
	held := "/v1/trader/" + e.sim.Wallets()[0] + "/activity"
	cold := "/v1/trader/" + e.sim.Wallets()[1] + "/activity"

	_, first := e.get(held)
	e.sim.SetFaults(legacysim.Faults{FailStatus: 500})
	edgeClock.Advance(time.Minute) // past TTL and stale_while_revalidate, inside stale_if_error (5m)

	resp, body := e.get(held)
	if resp.StatusCode != 200 || resp.Header.Get("X-Cache") != "STALE" || !bytes.Equal(body, first) {
		t.Errorf("held page: %d %s", resp.StatusCode, resp.Header.Get("X-Cache"))
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "private, max-age=0" {
		t.Errorf("stale Cache-Control = %q", cc)
	}
	resp, body = e.get(cold)
	failure(t, resp, body, 502, "Upstream error")

	// A refusal that is the client's fault is never papered over.
	e.sim.SetFaults(legacysim.Faults{FailStatus: 400})
	edgeClock.Advance(time.Minute)
	resp, _ = e.get(held)
	if resp.StatusCode != 400 {
		t.Errorf("upstream 400 with a stale page held: %d", resp.StatusCode)
	}

	// Past stale_if_error the error is the answer.
	e.sim.SetFaults(legacysim.Faults{FailStatus: 503})
	edgeClock.Advance(10 * time.Minute)
	resp, body = e.get(held)
	failure(t, resp, body, 502, "Upstream error")
}

func TestConditionalAndGzip(t *testing.T) {
	e := newEdge(t)
	token := e.sim.Markets()[0].Tokens[0]
	big := "/v1/orderbook/events?tokenId=" + url.QueryEscape(token) + "&limit=1000"

	resp, plain := e.get(big, "Accept-Encoding", "identity")
	if resp.Header.Get("Content-Encoding") != "" || !json.Valid(plain) {
		t.Fatalf("identity: encoding %q", resp.Header.Get("Content-Encoding"))
	}
	tag := resp.Header.Get("ETag")
	resp, zipped := e.get(big, "Accept-Encoding", "gzip, deflate")
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Vary") != "Accept-Encoding" {
		t.Fatalf("gzip: encoding %q vary %q", resp.Header.Get("Content-Encoding"), resp.Header.Get("Vary"))
	}
	gzTag := resp.Header.Get("ETag")
	if gzTag == tag || !strings.HasPrefix(tag, `"`) {
		t.Errorf("ETags: identity %s, gzip %s", tag, gzTag)
	}
	zr, err := gzip.NewReader(bytes.NewReader(zipped))
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(unzipped, plain) {
		t.Fatalf("gunzip differs from identity (%v)", err)
	}
	if len(zipped) >= len(plain) {
		t.Errorf("gzip %d bytes, identity %d", len(zipped), len(plain))
	}
	if resp, _ := e.get(big, "Accept-Encoding", "gzip;q=0"); resp.Header.Get("Content-Encoding") != "" {
		t.Error("gzip;q=0 got gzip")
	}

	for _, inm := range []string{tag, gzTag, "W/" + tag, `"other", ` + tag, "*"} {
		resp, body := e.get(big, "If-None-Match", inm, "Accept-Encoding", "identity")
		if resp.StatusCode != 304 || len(body) != 0 || resp.Header.Get("ETag") != tag {
			t.Errorf("If-None-Match %s: %d, %d bytes, ETag %s", inm, resp.StatusCode, len(body), resp.Header.Get("ETag"))
		}
	}
	if resp, _ := e.get(big, "If-None-Match", `"other"`); resp.StatusCode != 200 {
		t.Errorf("non-matching If-None-Match: %d", resp.StatusCode)
	}

	// A small page is never compressed.
	resp, _ = e.get("/v1/trader/wallet-address/"+e.sim.Wallets()[0], "Accept-Encoding", "gzip")
	if resp.Header.Get("Content-Encoding") != "" {
		t.Error("small page gzip-compressed")
	}
}

func TestSameMeaningSharesOneEntry(t *testing.T) {
	// Pages fresh for a minute: the test asks whether two spellings meet
	// in one entry, not how long it stays fresh, and a large events page
	// fetched under the race detector can outlast the default TTL.
	e := newEdge(t, withConfig(func(c *config.Config) {
		c.Cache.Policy.FreshTTL = time.Minute
		c.Cache.Routes = nil
	}))
	m := e.sim.Markets()[0]
	a, b := url.QueryEscape(m.Tokens[0]), url.QueryEscape(m.Tokens[1])
	w := e.sim.Wallets()[0]
	pairs := [][2]string{
		{"/v1/orderbook/events?tokenId=" + a + "," + b, "/v1/orderbook/events?tokenId=" + b + "&tokenId=" + a},
		{"/v1/orderbook/events?marketId=" + m.ID + "&order=DESC", "/v1/orderbook/events?order=desc&marketId=" + m.ID},
		{"/v1/trader/" + w + "/activity", "/v1/trader/0x" + strings.ToUpper(w[2:]) + "/activity?limit=20&unknown=1"},
	}
	for _, p := range pairs {
		e.get(p[0])
		if resp, _ := e.get(p[1]); resp.Header.Get("X-Cache") != "HIT" {
			t.Errorf("%s after %s: X-Cache %s", p[1], p[0], resp.Header.Get("X-Cache"))
		}
	}
	if got := e.sim.Stats().Requests; got != int64(len(pairs)) {
		t.Errorf("legacy host saw %d requests, want %d", got, len(pairs))
	}
}

// cacheControl fetches path and returns its Cache-Control.
func cacheControl(t *testing.T, e *edge, path string) string {
	t.Helper()
	resp, body := e.get(path)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
	}
	return resp.Header.Get("Cache-Control")
}

// nextCursor returns data.nextCursor of a list page.
func nextCursor(t *testing.T, e *edge, path string) string {
	t.Helper()
	_, body := e.get(path)
	var env struct{ Data struct{ NextCursor *string } }
	if err := json.Unmarshal(body, &env); err != nil || env.Data.NextCursor == nil {
		t.Fatalf("%s: no nextCursor in %.200s", path, body)
	}
	return url.QueryEscape(*env.Data.NextCursor)
}

// openWithCursor is a second page of some wallet's open positions.
func openWithCursor(t *testing.T, e *edge) string {
	t.Helper()
	for _, w := range e.sim.Wallets() {
		p := "/v1/trader/" + w + "/positions/open?limit=1"
		_, body := e.get(p)
		var env struct{ Data struct{ NextCursor *string } }
		if json.Unmarshal(body, &env) == nil && env.Data.NextCursor != nil {
			return p + "&cursor=" + url.QueryEscape(*env.Data.NextCursor)
		}
	}
	t.Fatal("no wallet has two open positions")
	return ""
}

// TestPolicyPerRoute classifies a request of every route through the edge
// (immutable, fresh and null), moving the clock across the settle
// window.
func TestPolicyPerRoute(t *testing.T) {
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	edgeClock := testkit.NewClock(base)
	e := newEdge(t, withClock(edgeClock.Now), withSim(legacysim.Config{Seed: 7, Now: func() time.Time { return base }, End: base}))
	const (
		immutable = "private, max-age=86400, immutable"
		fresh     = "private, max-age=1"
		negative  = "private, max-age=2"
	)
	w := e.sim.Wallets()[0]
	token := url.QueryEscape(e.sim.Markets()[0].Tokens[0])
	hourAgo := base.Add(-time.Hour)
	tr := "/v1/trader/" + w
	tests := []struct {
		name, path, want string
	}{
		{"orderbook open-ended", "/v1/orderbook/events?tokenId=" + token + "&order=desc&limit=5", fresh},
		{"orderbook settled to", "/v1/orderbook/events?tokenId=" + token + "&to=" + strconv.FormatInt(hourAgo.UnixMilli(), 10), immutable},
		{"orderbook old cursor", "/v1/orderbook/events?tokenId=" + token + "&limit=5&cursor=" +
			nextCursor(t, e, "/v1/orderbook/events?tokenId="+token+"&limit=5"), immutable},
		{"activity first page", tr + "/activity", fresh},
		{"activity settled toTimestamp", tr + "/activity?toTimestamp=" + strconv.FormatInt(hourAgo.Unix(), 10), immutable},
		{"activity cursor", tr + "/activity?cursor=" + nextCursor(t, e, tr+"/activity?limit=20"), immutable},
		{"activity toBlock only", tr + "/activity?toBlock=1", fresh},
		{"transfers first page", tr + "/deposits-withdrawals", fresh},
		{"transfers settled", tr + "/deposits-withdrawals?toTimestamp=" + strconv.FormatInt(hourAgo.Unix(), 10), immutable},
		{"combos first page", tr + "/combo-positions/closed", fresh},
		{"combos cursor", tr + "/combo-positions/closed?limit=1&cursor=" + nextCursor(t, e, tr+"/combo-positions/closed?limit=1"), immutable},
		{"closed first page", tr + "/positions/closed", fresh},
		{"closed cursor", tr + "/positions/closed?limit=1&cursor=" + nextCursor(t, e, tr+"/positions/closed?limit=1"), immutable},
		{"open positions always fresh", openWithCursor(t, e), fresh},
		{"tx found", "/v1/tx/" + e.sim.TradeTxs()[0], immutable},
		{"tx null", "/v1/tx/0x" + strings.Repeat("ab", 32), negative},
		{"wallet found", "/v1/trader/wallet-address/" + w, immutable},
		{"wallet null", "/v1/trader/wallet-address/0x" + strings.Repeat("cd", 20), negative},
	}
	for _, tc := range tests {
		if got := cacheControl(t, e, tc.path); got != tc.want {
			t.Errorf("%s: Cache-Control %q, want %q", tc.name, got, tc.want)
		}
	}

	// Across the settle window (5m): the newest events up to 4 minutes back
	// may still change; 2 minutes later, once the fresh entry has expired,
	// the same request is settled.
	recent := "/v1/orderbook/events?tokenId=" + token + "&order=desc&limit=5&to=" + strconv.FormatInt(base.Add(-4*time.Minute).UnixMilli(), 10)
	if got := cacheControl(t, e, recent); got != fresh {
		t.Errorf("to 4m ago: %q, want fresh", got)
	}
	edgeClock.Advance(2 * time.Minute)
	if got := cacheControl(t, e, recent); got != immutable {
		t.Errorf("to 6m ago: %q, want immutable", got)
	}
}

// TestCachedPagesKeepTheirBytes: the rewrite writes into a pooled scratch
// buffer (upstream.fetch); a cached page must be a copy of its own, never
// overwritten by the pages fetched after it.
func TestCachedPagesKeepTheirBytes(t *testing.T) {
	e := newEdge(t)
	wallets := e.sim.Wallets()
	first := make(map[string][]byte)
	for _, w := range wallets {
		path := "/v1/trader/" + w + "/activity"
		resp, body := e.get(path, "Accept-Encoding", "identity")
		if resp.StatusCode != 200 || resp.Header.Get("X-Cache") != "MISS" {
			t.Fatalf("%s: %d, X-Cache %s", path, resp.StatusCode, resp.Header.Get("X-Cache"))
		}
		first[path] = body
	}
	for path, want := range first {
		resp, body := e.get(path, "Accept-Encoding", "identity")
		if resp.Header.Get("X-Cache") != "HIT" {
			t.Fatalf("%s: X-Cache %s", path, resp.Header.Get("X-Cache"))
		}
		if !bytes.Equal(body, want) {
			t.Errorf("%s: the cached page changed after later fetches", path)
		}
	}
}

// Cache-Status (RFC 9211) says which cache answered and how, beside
// X-Cache: a miss forwarded and stored, then a hit with its freshness
// left, then a stale hit with a negative one.
func TestCacheStatusHeader(t *testing.T) {
	clk := testkit.NewClock(time.Now())
	e := newEdge(t, withClock(clk.Now))
	path := "/v1/trader/" + e.sim.Wallets()[0] + "/positions/open"
	for _, want := range []struct {
		advance time.Duration
		xcache  string
		status  string
	}{
		{0, "MISS", "tradergate; fwd=miss; stored"},
		{0, "HIT", "tradergate; hit; ttl=1"},
		{1500 * time.Millisecond, "STALE", "tradergate; hit; ttl=-1"},
	} {
		clk.Advance(want.advance)
		resp, _ := e.get(path)
		if got := resp.Header.Get("Cache-Status"); resp.Header.Get("X-Cache") != want.xcache || got != want.status {
			t.Errorf("X-Cache %q Cache-Status %q, want %q %q", resp.Header.Get("X-Cache"), got, want.xcache, want.status)
		}
	}
}

// The fields that follow a page's age (Age, Cache-Control's max-age,
// Cache-Status's ttl) are formatted once per second of age and kept with
// the entry: every hit must still read its own second, however many
// hits share it.
func TestHitFieldsFollowAge(t *testing.T) {
	clk := testkit.NewClock(time.Now())
	e := newEdge(t, withClock(clk.Now))
	settled := clk.Now().Add(-time.Hour).Unix() // an immutable page, long TTL
	path := "/v1/trader/" + e.sim.Wallets()[0] + "/activity?toTimestamp=" + strconv.FormatInt(settled, 10)
	resp, _ := e.get(path)
	var ttl int64
	if _, err := fmt.Sscanf(resp.Header.Get("Cache-Control"), "private, max-age=%d, immutable", &ttl); err != nil || ttl < 10 {
		t.Fatalf("first answer: Cache-Control %q (%v), want an immutable page fresh for 10s or more", resp.Header.Get("Cache-Control"), err)
	}
	var elapsed time.Duration
	for _, step := range []time.Duration{0, 300 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond, 500 * time.Millisecond, 400 * time.Millisecond, 3300 * time.Millisecond} {
		clk.Advance(step)
		elapsed += step
		resp, _ := e.get(path)
		left := time.Duration(ttl)*time.Second - elapsed
		want := map[string]string{
			"X-Cache":       "HIT",
			"Age":           strconv.FormatInt(int64(elapsed/time.Second), 10),
			"Cache-Control": "private, max-age=" + strconv.FormatInt(int64(left/time.Second), 10) + ", immutable",
			"Cache-Status":  "tradergate; hit; ttl=" + strconv.FormatInt(int64(left.Round(time.Second)/time.Second), 10),
		}
		for name, v := range want {
			if got := resp.Header.Get(name); got != v {
				t.Errorf("%v after the miss: %s %q, want %q", elapsed, name, got, v)
			}
		}
	}
}
