package proxy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"tradergate/internal/testkit"
	"tradergate/legacysim"
	"tradergate/limits"
	"tradergate/proxy/config"
	"tradergate/proxy/route"
)

// bookEdge is an edge over a legacysim whose order books exercise every
// case of a rebuild (sparse snapshots, removals, "0.5" and "0.50", ...).
func bookEdge(t *testing.T, opts ...edgeOption) *edge {
	return newEdge(t, append([]edgeOption{withSim(legacysim.Config{Seed: 11, End: bookEnd(), History: 3 * time.Hour, Markets: 2, OrderBookVariety: true})}, opts...)...)
}

// bookEnd is the end of every book edge's history, taken once for the run:
// a simulated host lays its events out from its End, so two edges of one
// test built on either side of a second's turn would serve other events.
var bookEnd = sync.OnceValue(func() time.Time { return time.Now().Add(-time.Hour).Truncate(time.Second) })

type bookAnswer struct {
	TokenID           string `json:"tokenId"`
	At                int64  `json:"at"`
	SnapshotTimestamp int64  `json:"snapshotTimestamp"`
	EventsApplied     int    `json:"eventsApplied"`
	Crossed           bool   `json:"crossed"`
	Bids              []struct{ Price, Size string }
	Asks              []struct{ Price, Size string }
}

func getBook(t *testing.T, e *edge, token string, at int64, extra string) (int, bookAnswer, []byte) {
	t.Helper()
	resp, body := e.get("/v1/orderbook/book?tokenId=" + url.QueryEscape(token) + "&at=" + strconv.FormatInt(at, 10) + extra)
	var env struct{ Data bookAnswer }
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(body, &env); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
	}
	return resp.StatusCode, env.Data, body
}

// clientEvents is what a client of the events route reads: every event of
// the token, oldest first, paged through the edge itself.
type clientEvent struct {
	EventType, Side, Price, SizeAfter string
	Timestamp                         int64
	Bids, Asks                        [][2]string
}

func allEvents(t *testing.T, e *edge, token string) []clientEvent {
	t.Helper()
	var out []clientEvent
	cursor := ""
	for {
		path := "/v1/orderbook/events?tokenId=" + url.QueryEscape(token) + "&order=asc&limit=10000"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		resp, body := e.get(path)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		var env struct {
			Data struct {
				Items      []clientEvent
				NextCursor *string
			}
		}
		if err := json.Unmarshal(body, &env); err != nil {
			t.Fatal(err)
		}
		out = append(out, env.Data.Items...)
		if env.Data.NextCursor == nil {
			return out
		}
		cursor = *env.Data.NextCursor
	}
}

// naiveBook applies the contract's rule the slow and obvious way: every
// event up to at, a snapshot replacing the book; levels keyed by exact
// rational value (never a float).
func naiveBook(events []clientEvent, at int64) (bids, asks map[string]string, ok bool) {
	key := func(p string) string { r, _ := new(big.Rat).SetString(p); return r.RatString() }
	zero := func(s string) bool { r, _ := new(big.Rat).SetString(s); return r.Sign() == 0 }
	for _, ev := range events {
		if ev.Timestamp > at {
			break
		}
		switch ev.EventType {
		case "book":
			bids, asks, ok = map[string]string{}, map[string]string{}, true
			for _, l := range ev.Bids {
				if !zero(l[1]) {
					bids[key(l[0])] = l[1]
				} else {
					delete(bids, key(l[0]))
				}
			}
			for _, l := range ev.Asks {
				if !zero(l[1]) {
					asks[key(l[0])] = l[1]
				} else {
					delete(asks, key(l[0]))
				}
			}
		case "price_change":
			if !ok {
				continue
			}
			side := bids
			if ev.Side == "SELL" {
				side = asks
			}
			if zero(ev.SizeAfter) {
				delete(side, key(ev.Price))
			} else {
				side[key(ev.Price)] = ev.SizeAfter
			}
		}
	}
	return bids, asks, ok
}

func levelsOf(ls []struct{ Price, Size string }) map[string]string {
	m := map[string]string{}
	for _, l := range ls {
		r, _ := new(big.Rat).SetString(l.Price)
		m[r.RatString()] = l.Size
	}
	return m
}

// The edge's book at T equals a client's own rebuild over the events it
// reads from the same edge, at times around the snapshots and events.
func TestBookMatchesAClientsRebuild(t *testing.T) {
	e := bookEdge(t)
	token := e.sim.Markets()[0].Tokens[0]
	events := allEvents(t, e, token)
	if len(events) < 1000 {
		t.Fatalf("only %d events", len(events))
	}
	var snaps []int64
	for _, ev := range events {
		if ev.EventType == "book" {
			snaps = append(snaps, ev.Timestamp)
		}
	}
	last := events[len(events)-1].Timestamp
	ats := []int64{events[0].Timestamp - 1, snaps[0], snaps[0] + 1, snaps[len(snaps)-1], snaps[len(snaps)-1] - 1,
		(snaps[0] + last) / 2, last, last + 60_000}
	for i := 1; i < len(snaps); i++ {
		ats = append(ats, snaps[i]-1, snaps[i])
	}
	for _, at := range ats {
		wantBids, wantAsks, ok := naiveBook(events, at)
		status, got, body := getBook(t, e, token, at, "")
		if !ok {
			if status != 404 || !strings.Contains(string(body), "No order book snapshot at or before the requested time") {
				t.Errorf("at %d, before any snapshot: %d %s", at, status, body)
			}
			continue
		}
		if status != 200 {
			t.Fatalf("at %d: %d %s", at, status, body)
		}
		if gb, ga := levelsOf(got.Bids), levelsOf(got.Asks); !mapsEqual(gb, wantBids) || !mapsEqual(ga, wantAsks) {
			t.Errorf("at %d: bids %v asks %v, want %v %v", at, gb, ga, wantBids, wantAsks)
		}
		if !slices.IsSortedFunc(got.Bids, func(a, b struct{ Price, Size string }) int { return ratCmp(b.Price, a.Price) }) ||
			!slices.IsSortedFunc(got.Asks, func(a, b struct{ Price, Size string }) int { return ratCmp(a.Price, b.Price) }) {
			t.Errorf("at %d: levels out of order", at)
		}
		if got.At != at || got.TokenID != token || got.SnapshotTimestamp > at {
			t.Errorf("at %d: %+v", at, got)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func ratCmp(a, b string) int {
	x, _ := new(big.Rat).SetString(a)
	y, _ := new(big.Rat).SetString(b)
	return x.Cmp(y)
}

// Every page of a rebuild is a page of the cache: a second rebuild at the
// same T calls the legacy host no more, and two at once share their pages.
func TestBookPagesComeFromTheCache(t *testing.T) {
	e := bookEdge(t)
	token := e.sim.Markets()[0].Tokens[1]
	at := time.Now().Add(-90 * time.Minute).UnixMilli()
	if status, _, body := getBook(t, e, token, at, ""); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	first := e.sim.Stats().Requests
	if first < 2 {
		t.Fatalf("the first rebuild made %d legacy calls", first)
	}
	if status, _, _ := getBook(t, e, token, at, "&depth=3"); status != 200 || e.sim.Stats().Requests != first {
		t.Errorf("second rebuild: %d, legacy calls %d -> %d", status, first, e.sim.Stats().Requests)
	}

	at2 := at - 20*60_000
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i := range statuses {
		wg.Go(func() { statuses[i], _, _ = getBook(t, e, token, at2, "") })
	}
	wg.Wait()
	pages := e.sim.Stats().Requests - first
	if statuses[0] != 200 || statuses[1] != 200 {
		t.Fatalf("concurrent rebuilds: %v", statuses)
	}
	// The same rebuild alone, on a fresh edge, to count its pages.
	solo := bookEdge(t)
	if status, _, _ := getBook(t, solo, token, at2, ""); status != 200 || solo.sim.Stats().Requests != pages {
		t.Errorf("two concurrent rebuilds made %d legacy calls, one alone %d", pages, solo.sim.Stats().Requests)
	}
}

func TestBookErrors(t *testing.T) {
	e := bookEdge(t, withConfig(func(c *config.Config) { c.OrderBook.MaxEvents = 50 }))
	token := e.sim.Markets()[0].Tokens[0]
	at := time.Now().Add(-90 * time.Minute).UnixMilli()
	for _, tc := range []struct {
		query  string
		status int
		msg    string
	}{
		{"", 400, "tokenId is required"},
		{"tokenId=a,b", 400, "Too many tokenId values: at most 1"},
		{"tokenId=a&tokenId=b", 400, "Too many tokenId values: at most 1"},
		{"tokenId=" + token + "&at=-5", 400, "Invalid at: must be a non-negative integer"},
		{"tokenId=" + token + "&at=01", 400, "Invalid at: must be a non-negative integer"},
		{"tokenId=" + token + "&depth=0", 400, "Invalid depth: must be an integer from 1 to 100000"},
		{"tokenId=" + token + "&at=1", 404, "No order book snapshot at or before the requested time"},
		{"tokenId=12345&at=" + strconv.FormatInt(at, 10), 404, "No order book snapshot at or before the requested time"},
		{"tokenId=" + token + "&at=" + strconv.FormatInt(farFromSnapshot(t, e, token, 60), 10), 422,
			"More than 50 price changes between the last snapshot and at: pick an at nearer a snapshot"},
	} {
		resp, body := e.get("/v1/orderbook/book?" + tc.query)
		failure(t, resp, body, tc.status, tc.msg)
	}
}

// farFromSnapshot is a time with more than n price changes of the token
// since its last snapshot.
func farFromSnapshot(t *testing.T, e *edge, token string, n int) int64 {
	t.Helper()
	since := -1
	for _, ev := range allEvents(t, e, token) {
		switch {
		case ev.EventType == "book":
			since = 0
		case since >= 0:
			since++
			if since > n {
				return ev.Timestamp
			}
		}
	}
	t.Fatalf("no run of %d price changes without a snapshot", n)
	return 0
}

// A legacy failure in the middle of a rebuild is the usual 5xx, never a
// partial book, and leaves nothing running once the edge is stopped.
func TestBookUpstreamFailureMidRebuild(t *testing.T) {
	leaks := append([]goleak.Option{goleak.IgnoreCurrent()}, append(certmagicGoroutines, testkit.FasthttpGoroutines...)...)
	t.Cleanup(func() { goleak.VerifyNone(t, leaks...) }) // runs last, after the edge's own cleanups
	// The snapshot pages are answered; every price change page fails.
	var snapshots atomic.Int64
	e := bookEdge(t, withUpstream(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("eventType") == "price_change" {
				http.Error(w, "down", http.StatusInternalServerError)
				return
			}
			snapshots.Add(1)
			next.ServeHTTP(w, r)
		})
	}))
	token := e.sim.Markets()[1].Tokens[0]
	for _, at := range []int64{time.Now().Add(-2 * time.Hour).UnixMilli(), time.Now().Add(-30 * time.Second).UnixMilli()} {
		before := snapshots.Load()
		resp, body := e.get("/v1/orderbook/book?tokenId=" + url.QueryEscape(token) + "&at=" + strconv.FormatInt(at, 10))
		failure(t, resp, body, 502, "Upstream error")
		if snapshots.Load() == before {
			t.Errorf("at %d: failed before the snapshot was read", at)
		}
	}
}

// recentCalls names the last n calls the legacy host answered, for a
// failure message.
func recentCalls(e *edge, n int) string {
	recent := e.sim.Recent()
	var b strings.Builder
	for _, r := range recent[max(len(recent)-n, 0):] {
		fmt.Fprintf(&b, "\n\t%s %s?%s", r.Route, r.Path, r.Query.Encode())
	}
	return b.String()
}

// legacyBounds is the `to` of each events page the legacy host was asked
// for since it had answered *seen requests, which it updates.
func legacyBounds(t *testing.T, e *edge, seen *int64) []int64 {
	t.Helper()
	n := e.sim.Stats().Requests
	recent := e.sim.Recent()
	if int(n-*seen) > len(recent) {
		t.Fatalf("%d legacy calls, only the last %d recorded", n-*seen, len(recent))
	}
	var out []int64
	for _, r := range recent[len(recent)-int(n-*seen):] {
		if r.Route == route.OrderBookEvents {
			to, _ := strconv.ParseInt(r.Query.Get("to"), 10, 64)
			out = append(out, to)
		}
	}
	*seen = n
	return out
}

// A settled time is read from pages bounded at the next whole minute:
// rebuilds at T and T+1 ms (or anywhere before that minute ends) cost no
// second legacy call. A recent time reads its pages on its exact bound.
func TestBookSettledTimesShareTheirPages(t *testing.T) {
	e := bookEdge(t)
	token := e.sim.Markets()[0].Tokens[0]
	// Times five minutes after a snapshot, so that no snapshot lies
	// between them and their minute's end (the sim has one every ten).
	var snaps []int64
	for _, ev := range allEvents(t, e, token) {
		if ev.EventType == "book" {
			snaps = append(snaps, ev.Timestamp)
		}
	}
	seen := e.sim.Stats().Requests
	for _, snap := range []int64{snaps[1], snaps[len(snaps)/2], snaps[len(snaps)-2]} {
		at := snap + 5*60_000 + 1234
		bound := (at + 59_999) / 60_000 * 60_000
		calls := e.sim.Stats().Requests
		if status, _, body := getBook(t, e, token, at, ""); status != 200 {
			t.Fatalf("at %d: %d %s", at, status, body)
		}
		first := e.sim.Stats().Requests - calls
		if first < 2 {
			t.Fatalf("at %d: %d legacy calls", at, first)
		}
		for _, to := range legacyBounds(t, e, &seen) {
			if to != bound {
				t.Errorf("at %d: a page bounded at %d, want %d", at, to, bound)
			}
		}
		// The first millisecond that rounds up to bound, not a fixed step
		// back from at: at may lie in its minute's first second.
		for _, near := range []int64{at + 1, bound - 59_999, bound} {
			if status, got, body := getBook(t, e, token, near, ""); status != 200 || got.At != near {
				t.Fatalf("at %d: %d %s", near, status, body)
			}
		}
		if n := e.sim.Stats().Requests - calls; n != first {
			t.Errorf("at %d: rebuilds at nearby times made %d legacy calls beyond the first rebuild's %d: %s",
				at, n-first, first, recentCalls(e, int(n-first)))
		}
	}

	// Recent: the minute's end is not settled, so the bound is T itself,
	// and T+1 ms is another page.
	at := time.Now().Add(-time.Minute).UnixMilli()
	for _, t1 := range []int64{at, at + 1} {
		if status, _, body := getBook(t, e, token, t1, ""); status != 200 {
			t.Fatalf("recent at %d: %d %s", t1, status, body)
		}
		bounds := legacyBounds(t, e, &seen)
		if len(bounds) < 2 {
			t.Fatalf("recent at %d: %d legacy calls", t1, len(bounds))
		}
		for _, to := range bounds {
			if to != t1 {
				t.Errorf("recent at %d: a page bounded at %d", t1, to)
			}
		}
	}
}

// On aligned bounds the edge answers, byte for byte, what an edge reading
// every page on its exact bound answers, at random settled times; and both
// agree with a client's own rebuild.
func TestBookAlignedAnswersEqualExact(t *testing.T) {
	aligned := bookEdge(t)
	exact := bookEdge(t, withConfig(func(c *config.Config) { c.OrderBook.Align = -1 }))
	token := aligned.sim.Markets()[1].Tokens[1]
	events := allEvents(t, aligned, token)
	first, last := events[0].Timestamp, events[len(events)-1].Timestamp
	rng := rand.New(rand.NewPCG(11, 7))
	for range 25 {
		at := first - 60_000 + rng.Int64N(last-first+120_000)
		sa, ga, ba := getBook(t, aligned, token, at, "")
		se, _, be := getBook(t, exact, token, at, "")
		if sa != se || !bytes.Equal(ba, be) {
			t.Fatalf("at %d: aligned %d %s\nexact %d %s", at, sa, ba, se, be)
		}
		if wantBids, wantAsks, ok := naiveBook(events, at); ok != (sa == 200) ||
			ok && (!mapsEqual(levelsOf(ga.Bids), wantBids) || !mapsEqual(levelsOf(ga.Asks), wantAsks)) {
			t.Fatalf("at %d: %d %s, a client's rebuild found a snapshot: %v", at, sa, ba, ok)
		}
	}
}

// A rebuild is charged the events pages it reads, cached or not: the
// second rebuild near the same T costs the legacy host nothing and the
// client as much as the first. A charge past the allowance is a 429.
func TestBookChargedPerPage(t *testing.T) {
	e := bookEdge(t)
	token := e.sim.Markets()[0].Tokens[1]
	at := time.Now().Add(-90*time.Minute).Truncate(time.Minute).UnixMilli() + 5_000
	remaining := func(resp *http.Response) int {
		n, err := strconv.Atoi(resp.Header.Get("X-RateLimit-Remaining"))
		if err != nil {
			t.Fatalf("X-RateLimit-Remaining %q", resp.Header.Get("X-RateLimit-Remaining"))
		}
		return n
	}
	path := func(at int64) string {
		return "/v1/orderbook/book?tokenId=" + url.QueryEscape(token) + "&at=" + strconv.FormatInt(at, 10)
	}
	// Any request with the key reads its allowance (not /v1/openapi.json,
	// which is charged to the client address).
	resp, _ := e.get("/v1/trader/wallet-address/0x" + strings.Repeat("0", 40))
	left := remaining(resp)
	calls := e.sim.Stats().Requests
	resp, body := e.get(path(at))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	pages := int(e.sim.Stats().Requests - calls) // all misses on a fresh edge
	if pages < 2 || remaining(resp) != left-pages {
		t.Fatalf("a rebuild of %d pages left %d of %d", pages, remaining(resp), left)
	}
	left = remaining(resp)
	resp, _ = e.get(path(at + 1))
	if resp.StatusCode != 200 || e.sim.Stats().Requests != calls+int64(pages) || remaining(resp) != left-pages {
		t.Fatalf("a rebuild from cached pages: %d, legacy calls %d -> %d, left %d of %d",
			resp.StatusCode, calls+int64(pages), e.sim.Stats().Requests, remaining(resp), left)
	}

	// A plan of one request: the rebuild passes the rate limit step, and
	// its second page is past the allowance.
	tight := bookEdge(t, withConfig(func(c *config.Config) { c.Plans["pro"] = limits.Plan{Requests: 1, Window: time.Hour} }))
	resp, body = tight.get(path(at))
	failure(t, resp, body, 429, "Rate limit exceeded")
	if resp.Header.Get("Retry-After") == "" || remaining(resp) != 0 {
		t.Errorf("429 with Retry-After %q, X-RateLimit-Remaining %q", resp.Header.Get("Retry-After"), resp.Header.Get("X-RateLimit-Remaining"))
	}
}
