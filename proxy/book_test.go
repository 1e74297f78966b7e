package proxy_test

import (
	"encoding/json"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"tradergate/internal/testkit"
	"tradergate/legacysim"
	"tradergate/proxy"
)

// bookEdge is an edge over a legacysim whose order books exercise every
// case of a rebuild (sparse snapshots, removals, "0.5" and "0.50", ...).
func bookEdge(t *testing.T, opts ...edgeOption) *edge {
	end := time.Now().Add(-time.Hour).Truncate(time.Second)
	return newEdge(t, append([]edgeOption{withSim(legacysim.Config{Seed: 11, End: end, History: 3 * time.Hour, Markets: 2, OrderBookVariety: true})}, opts...)...)
}

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
	e := bookEdge(t, withConfig(func(c *proxy.Config) { c.OrderBook.MaxEvents = 50 }))
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
	e := bookEdge(t)
	token := e.sim.Markets()[1].Tokens[0]
	at := time.Now().Add(-2 * time.Hour).UnixMilli()
	// The snapshot page is cached first; then every legacy call fails.
	if resp, body := e.get("/v1/orderbook/events?tokenId=" + url.QueryEscape(token) + "&eventType=book&to=" +
		strconv.FormatInt(at, 10) + "&order=desc&limit=1"); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	e.sim.SetFaults(legacysim.Faults{FailStatus: 500})
	resp, body := e.get("/v1/orderbook/book?tokenId=" + url.QueryEscape(token) + "&at=" + strconv.FormatInt(at, 10))
	failure(t, resp, body, 502, "Upstream error")
}
