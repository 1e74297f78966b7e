package legacysim

import (
	"context"
	"encoding/json"
	"maps"
	"math/big"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"tradergate/internal/testkit"
)

// liveSim is a sim in live mode whose clock stands at End, with brisk
// rates, and a server in front of it.
func liveSim(t *testing.T, cfg Config) (*Sim, *httptest.Server, *testkit.Clock) {
	t.Helper()
	clk := testkit.NewClock(testEnd)
	cfg.End, cfg.Now = testEnd, clk.Now
	if cfg.Live == nil {
		cfg.Live = &Live{BookEvery: time.Second, TradeEvery: 10 * time.Second, TransferEvery: time.Minute}
	}
	s := New(cfg)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv, clk
}

// Past End, new items arrive at the configured rates on every list that
// grows: order book events (snapshots included), trades that can be
// looked up as transactions, deposits and withdrawals.
func TestLiveGrows(t *testing.T) {
	s, srv, clk := liveSim(t, Config{})
	w := s.Wallets()[3]
	tok := s.Markets()[0].Tokens[0]
	endS, endMs := testEnd.Unix(), testEnd.UnixMilli()

	first := func(path string) listData {
		return get(t, srv, path, url.Values{"limit": {"100"}}).list(t)
	}
	act := "/open-api/v1/trader/" + w + "/activity"
	tr := "/open-api/v1/trader/" + w + "/deposits-withdrawals"
	if ts := field[int64](t, first(act).Items[0], "blockTimestamp"); ts > endS {
		t.Fatalf("a trade at %d before the clock passed End", ts)
	}
	clk.Advance(15 * time.Minute)

	news := 0
	for _, it := range first(act).Items {
		if field[int64](t, it, "blockTimestamp") > endS {
			news++
			tx := get(t, srv, "/open-api/v1/tx/"+field[string](t, it, "txHash"), nil).ok(t)
			if string(tx) == "null" || field[string](t, tx, "profileAddress") != w {
				t.Fatalf("live trade's transaction: %s", tx)
			}
		}
	}
	// 15 minutes at one trade every 10 s on average.
	if news < 50 || news > 100 {
		t.Errorf("%d new trades in 15 minutes", news)
	}
	newTr := 0
	for _, it := range first(tr).Items {
		if field[int64](t, it, "blockTimestamp") > endS {
			newTr++
		}
	}
	if newTr < 6 || newTr > 30 {
		t.Errorf("%d new transfers in 15 minutes", newTr)
	}
	from := strconv.FormatInt(endMs+1, 10)
	evs := walk(t, srv, obPath, url.Values{"tokenId": {tok}, "from": {from}, "limit": {"100"}}, 100)
	books := 0
	for _, ev := range evs {
		if ts := field[int64](t, ev, "timestamp"); ts > clk.Now().UnixMilli() {
			t.Fatalf("event at %d after now", ts)
		}
		if field[string](t, ev, "eventType") == "book" {
			books++
		}
	}
	// End is on the snapshot grid: one snapshot 10 minutes after it.
	if len(evs) < 600 || len(evs) > 1200 || books != 1 {
		t.Errorf("%d new events, %d snapshots, in 15 minutes", len(evs), books)
	}
}

// The reconstruction rule rebuilds each live snapshot from the one before
// and the changes between, as in the generated data: the live book is one
// book, and its snapshots say the truth about it.
func TestLiveBookReconstruction(t *testing.T) {
	for _, variety := range []bool{false, true} {
		s, srv, clk := liveSim(t, Config{OrderBookVariety: variety, History: 3 * time.Hour})
		clk.Advance(45 * time.Minute)
		tok := s.Markets()[1].Tokens[0]
		from := strconv.FormatInt(testEnd.UnixMilli()+1, 10)
		books := walk(t, srv, obPath, url.Values{"tokenId": {tok}, "eventType": {"book"}, "from": {from}}, 1000)
		if len(books) < 4 {
			t.Fatalf("variety %v: %d live snapshots in 45 minutes", variety, len(books))
		}
		for _, next := range books {
			T := field[int64](t, next, "timestamp") - 1
			got := rebuildByValue(t, srv, tok, T)
			want := rebuildByValue(t, srv, tok, T+1) // the snapshot itself, no change after it
			if !maps.Equal(got.bids, want.bids) || !maps.Equal(got.asks, want.asks) {
				t.Fatalf("variety %v: rebuilt %v, snapshot %v", variety, got, want)
			}
		}
	}
}

// rebuildByValue is reconstruct with levels keyed by the value of their
// price, sizes by value, and a size of value 0 removing its level: the
// variety books spell one price several ways ("0.5", "0.50") and a
// removal "0.00".
func rebuildByValue(t *testing.T, srv *httptest.Server, tok string, T int64) bookState {
	t.Helper()
	value := func(s string) string {
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("decimal %q", s)
		}
		return r.RatString()
	}
	to := strconv.FormatInt(T, 10)
	l := get(t, srv, obPath, url.Values{"tokenId": {tok}, "eventType": {"book"}, "to": {to}, "order": {"desc"}, "limit": {"1"}}).list(t)
	if len(l.Items) != 1 {
		t.Fatalf("no book at or before %d", T)
	}
	st := bookState{map[string]string{}, map[string]string{}}
	for p, sz := range levelsOf(t, l.Items[0]).bids {
		st.bids[value(p)] = value(sz)
	}
	for p, sz := range levelsOf(t, l.Items[0]).asks {
		st.asks[value(p)] = value(sz)
	}
	q := url.Values{"tokenId": {tok}, "eventType": {"price_change"}, "to": {to}, "order": {"asc"},
		"limit": {"100"}, "cursor": {field[string](t, l.Items[0], "cursor")}}
	for _, ev := range walk(t, srv, obPath, q, 100) {
		side := st.asks
		if field[string](t, ev, "side") == "BUY" {
			side = st.bids
		}
		p, size := value(field[string](t, ev, "price")), value(field[string](t, ev, "sizeAfter"))
		if size == "0" {
			delete(side, p)
		} else {
			side[p] = size
		}
	}
	return st
}

// liveTargets are requests whose answers change as the data grows.
func liveTargets(s *Sim) []string {
	var out []string
	for _, w := range s.Wallets()[:4] {
		out = append(out, "/open-api/v1/trader/"+w+"/activity?limit=30",
			"/open-api/v1/trader/"+w+"/deposits-withdrawals?limit=30")
	}
	for _, m := range s.Markets()[:3] {
		out = append(out, "/open-api/v1/orderbook/events?marketId="+m.ID+"&order=desc&limit=200",
			"/open-api/v1/orderbook/events?tokenId="+m.Tokens[1]+"&eventType=book&order=desc&limit=3")
	}
	return out
}

func body(t *testing.T, srv *httptest.Server, target string) string {
	t.Helper()
	return string(do(t, srv, http.MethodGet, srv.URL+target, nil).body)
}

// The data at an instant does not hang on when the sim was asked before:
// one sim asked every few seconds and one asked only at the end answer
// the same bytes, and so do the transactions of the trades they list.
func TestLiveSameWhateverWasAskedBefore(t *testing.T) {
	often, oftenSrv, oftenClk := liveSim(t, Config{})
	_, onceSrv, onceClk := liveSim(t, Config{})
	targets := liveTargets(often)
	r := rand.New(rand.NewPCG(1, 2))
	for oftenClk.Now().Before(testEnd.Add(20 * time.Minute)) {
		oftenClk.Advance(time.Duration(1+r.IntN(20)) * time.Second)
		body(t, oftenSrv, targets[r.IntN(len(targets))])
	}
	onceClk.Set(oftenClk.Now())
	for _, tg := range targets {
		if a, b := body(t, oftenSrv, tg), body(t, onceSrv, tg); a != b {
			t.Fatalf("%s differs:\n%.300s\n%.300s", tg, a, b)
		}
	}
	// A transaction looked up first (its wallet never listed) is there.
	l := get(t, oftenSrv, "/open-api/v1/trader/"+often.Wallets()[9]+"/activity", url.Values{"limit": {"1"}}).list(t)
	tx := "/open-api/v1/tx/" + field[string](t, l.Items[0], "txHash")
	if a, b := body(t, oftenSrv, tx), body(t, onceSrv, tx); a != b || strings.Contains(a, `"data":null`) {
		t.Fatalf("transaction %s: %.200s and %.200s", tx, a, b)
	}
}

// A page of the past answers the same bytes however long after: wallet
// pages named by a cursor, order book pages bounded by a `to` before now
// or named by a cursor, in both orders.
func TestLivePastPagesStay(t *testing.T) {
	s, srv, clk := liveSim(t, Config{})
	clk.Advance(5 * time.Minute)
	nowMs := strconv.FormatInt(clk.Now().UnixMilli(), 10)
	m := s.Markets()[2]
	pages := map[string]string{} // target -> body
	chain := func(path string, q url.Values, n int) {
		for range n {
			target := path + "?" + q.Encode()
			b := get(t, srv, path, q)
			l := b.list(t)
			if q.Get("cursor") != "" || q.Get("to") != "" {
				pages[target] = string(b.body)
			}
			if l.NextCursor == nil {
				return
			}
			q = cloneValues(q)
			q.Set("cursor", *l.NextCursor)
		}
	}
	for _, w := range s.Wallets()[:3] {
		chain("/open-api/v1/trader/"+w+"/activity", url.Values{"limit": {"7"}}, 6)
		chain("/open-api/v1/trader/"+w+"/deposits-withdrawals", url.Values{"limit": {"3"}}, 4)
	}
	chain(obPath, url.Values{"marketId": {m.ID}, "order": {"desc"}, "limit": {"50"}}, 6)
	chain(obPath, url.Values{"marketId": {m.ID}, "to": {nowMs}, "order": {"desc"}, "limit": {"50"}}, 4)
	chain(obPath, url.Values{"marketId": {m.ID}, "to": {nowMs}, "from": {strconv.FormatInt(testEnd.Add(-time.Hour).UnixMilli(), 10)}, "limit": {"50"}}, 20)
	if len(pages) < 40 {
		t.Fatalf("%d pages of the past", len(pages))
	}
	for _, d := range []time.Duration{time.Second, time.Minute, 3 * time.Hour} {
		clk.Advance(d)
		for target, want := range pages {
			if got := body(t, srv, target); got != want {
				t.Fatalf("%v later, %s changed:\n%.300s\n%.300s", d, target, want, got)
			}
		}
	}
}

// An ascending client that polls forward from the newest event it holds,
// with nextCursor while there is one and the last event's cursor once it
// is null, sees every event after its start exactly once, in order,
// whatever the clock does between polls.
func TestLiveAscendingPollSeesEachEventOnce(t *testing.T) {
	s, srv, clk := liveSim(t, Config{})
	m := s.Markets()[0]
	base := url.Values{"marketId": {m.ID}, "order": {"asc"}, "limit": {"9"}}
	newest := get(t, srv, obPath, url.Values{"marketId": {m.ID}, "order": {"desc"}, "limit": {"1"}}).list(t).Items[0]
	cursor := field[string](t, newest, "cursor")
	var seen []json.RawMessage
	r := rand.New(rand.NewPCG(3, 4))
	for clk.Now().Before(testEnd.Add(15 * time.Minute)) {
		// Steps from a millisecond (a second event in the same poll window)
		// to over a minute (several pages waiting).
		clk.Advance(time.Duration(1+r.IntN(90_000)) * time.Millisecond)
		for {
			q := cloneValues(base)
			q.Set("cursor", cursor)
			l := get(t, srv, obPath, q).list(t)
			seen = append(seen, l.Items...)
			if n := len(l.Items); n > 0 {
				cursor = field[string](t, l.Items[n-1], "cursor")
			}
			if l.NextCursor == nil {
				break
			}
			if *l.NextCursor != cursor {
				t.Fatal("nextCursor is not the last event's cursor")
			}
		}
	}
	// The truth: every event after the start, read at the end in one walk
	// by a sim never asked before.
	fresh := New(Config{End: testEnd, Now: clk.Now, Live: &Live{BookEvery: time.Second, TradeEvery: 10 * time.Second, TransferEvery: time.Minute}})
	freshSrv := httptest.NewServer(fresh)
	defer freshSrv.Close()
	q := cloneValues(base)
	q.Set("cursor", field[string](t, newest, "cursor"))
	q.Set("limit", "1000")
	want := walk(t, freshSrv, obPath, q, 1000)
	if len(want) < 1000 || len(seen) != len(want) {
		t.Fatalf("polled %d events, %d happened", len(seen), len(want))
	}
	for i := range want {
		if string(seen[i]) != string(want[i]) {
			t.Fatalf("event %d: polled %.120s, happened %.120s", i, seen[i], want[i])
		}
	}
}

// Readers at every instant while the clock runs: the race detector's
// part (views are published whole; a generator appends where no reader
// reads).
func TestLiveConcurrentReaders(t *testing.T) {
	s, srv, clk := liveSim(t, Config{})
	targets := liveTargets(s)
	targets = append(targets, "/open-api/v1/tx/"+s.TradeTxs()[0])
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil && i < 200; i++ {
				if g == 0 {
					clk.Advance(3 * time.Second)
				}
				req, _ := http.NewRequest(http.MethodGet, srv.URL+targets[(g+i)%len(targets)], nil)
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
}

// The journal holds every request with what was answered and when: a
// page, a failure, a cut body, a hang.
func TestJournal(t *testing.T) {
	s, srv, clk := liveSim(t, Config{Journal: true})
	w := s.Wallets()[0]
	path := "/open-api/v1/trader/" + w + "/activity"
	page := get(t, srv, path, url.Values{"limit": {"3"}})
	clk.Advance(time.Minute)
	s.SetFaults(Faults{FailStatus: 503})
	get(t, srv, path, url.Values{"limit": {"3"}})
	s.SetFaults(Faults{Truncate: true})
	req, _ := http.NewRequest(http.MethodGet, srv.URL+path+"?limit=4", nil)
	req.Header.Set("X-Request-Id", "req-12345678")
	if resp, err := srv.Client().Do(req); err == nil {
		resp.Body.Close()
	}
	s.SetFaults(Faults{Hang: true})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
	if resp, err := srv.Client().Do(req); err == nil {
		resp.Body.Close()
	}
	cancel()
	s.SetFaults(Faults{})
	testkit.Eventually(t, "the hang recorded", func() bool { return len(s.Journal()) == 4 })

	j := s.Journal()
	if a := j[0]; a.Status != 200 || a.Body != string(page.body) || !a.At.Equal(testEnd) ||
		a.Path != path || a.Query != "limit=3" || a.Method != "GET" || a.Cut {
		t.Errorf("page: %+v", a)
	}
	if a := j[1]; a.Status != 503 || !strings.Contains(a.Body, `"code":"503"`) || !a.At.Equal(testEnd.Add(time.Minute)) {
		t.Errorf("failure: %+v", a)
	}
	if a := j[2]; a.Status != 200 || !a.Cut || a.RequestID != "req-12345678" || !strings.HasPrefix(a.Body, okPrefix) {
		t.Errorf("cut: %+v", a)
	}
	if a := j[3]; a.Status != 0 || a.Body != "" {
		t.Errorf("hang: %+v", a)
	}
	if New(Config{}).Journal() != nil {
		t.Error("a journal without Config.Journal")
	}
}
