package legacysim

import (
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"tradergate/internal/testkit"
)

// A test sets End in the future and moves its clock to make the upstream
// answer change: new trades, new order book events (Config.Now).
func TestClockRevealsItems(t *testing.T) {
	clk := testkit.NewClock(testEnd.Add(-2 * time.Hour))
	s := New(Config{End: testEnd, Now: clk.Now})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)

	visible := func(w *wallet) int {
		n := 0
		for _, a := range w.acts {
			if a.ts <= clk.Now().Unix() {
				n++
			}
		}
		return n
	}
	// A wallet with trades in the last two hours.
	wi := -1
	for i := range s.wallets {
		if visible(&s.wallets[i]) < len(s.wallets[i].acts) {
			wi = i
			break
		}
	}
	if wi < 0 {
		t.Fatal("no wallet traded in the last two hours")
	}
	w := &s.wallets[wi]
	path := "/open-api/v1/trader/" + w.addr + "/activity"
	q := url.Values{"limit": {"100"}}
	before := walk(t, srv, path, q, 100)
	if len(before) != visible(w) {
		t.Fatalf("%d items visible, want %d", len(before), visible(w))
	}
	future := w.acts[0] // newest first
	hidden := get(t, srv, "/open-api/v1/tx/"+future.tx, nil).ok(t)
	if string(hidden) != "null" {
		t.Fatalf("a transaction after Now() is visible: %s", hidden)
	}
	first := get(t, srv, path, url.Values{"limit": {"10"}}).list(t)

	clk.Set(testEnd)
	after := walk(t, srv, path, q, 100)
	if len(after) != len(w.acts) || len(after) <= len(before) {
		t.Fatalf("after advancing: %d items, before %d, all %d", len(after), len(before), len(w.acts))
	}
	if string(get(t, srv, "/open-api/v1/tx/"+future.tx, nil).ok(t)) == "null" {
		t.Fatal("transaction still hidden after its time")
	}
	// New items come first and do not shift older pages: the old cursor
	// resumes where it stopped.
	q2 := url.Values{"limit": {"10"}, "cursor": {*first.NextCursor}}
	resumed := get(t, srv, path, q2).list(t)
	if string(resumed.Items[0]) != string(before[10]) {
		t.Fatal("cursor taken before the clock moved does not resume at the same item")
	}

	// Order book: poll with the cursor of the newest event seen.
	clk.Set(testEnd.Add(-time.Hour))
	tok := s.Markets()[0].Tokens[1]
	last := get(t, srv, obPath, url.Values{"tokenId": {tok}, "order": {"desc"}, "limit": {"1"}}).list(t).Items[0]
	if ts := field[int64](t, last, "timestamp"); ts > clk.Now().UnixMilli() {
		t.Fatalf("event at %d visible at %d", ts, clk.Now().UnixMilli())
	}
	poll := url.Values{"tokenId": {tok}, "cursor": {field[string](t, last, "cursor")}}
	if l := get(t, srv, obPath, poll).list(t); len(l.Items) != 0 || l.NextCursor != nil {
		t.Fatalf("%d events after the newest", len(l.Items))
	}
	clk.Advance(10 * time.Minute)
	news := get(t, srv, obPath, poll).list(t).Items
	if len(news) < 10 {
		t.Fatalf("%d new events in 10 minutes", len(news))
	}
	for _, ev := range news {
		if ts := field[int64](t, ev, "timestamp"); ts <= field[int64](t, last, "timestamp") || ts > clk.Now().UnixMilli() {
			t.Fatalf("new event at %d", ts)
		}
	}
	// A to beyond Now() is cut at Now().
	far := strconv.FormatInt(testEnd.Add(time.Hour).UnixMilli(), 10)
	l := get(t, srv, obPath, url.Values{"tokenId": {tok}, "to": {far}, "order": {"desc"}, "limit": {"1"}}).list(t)
	if field[int64](t, l.Items[0], "timestamp") > clk.Now().UnixMilli() {
		t.Fatal("to beyond Now() shows future events")
	}
}

func TestDefaultsFromClock(t *testing.T) {
	now := time.Date(2025, 7, 1, 10, 30, 15, 123456789, time.UTC)
	s := New(Config{Now: func() time.Time { return now }})
	if !s.end.Equal(now.Truncate(time.Second)) || s.end.Sub(s.start) != 72*time.Hour {
		t.Fatalf("window %v .. %v", s.start, s.end)
	}
	if len(s.Wallets()) != 16 || len(s.Markets()) != 8 {
		t.Fatalf("%d wallets, %d markets", len(s.Wallets()), len(s.Markets()))
	}
	small := New(Config{End: testEnd, History: time.Hour, Wallets: 2, Markets: 2})
	if len(small.Wallets()) != 2 || len(small.Markets()) != 2 {
		t.Fatal("sizes not applied")
	}
	if n := len(small.book(0).events); n < 100 || n > 400 {
		t.Fatalf("%d events in one hour", n)
	}
	resolved := 0
	for _, m := range New(Config{End: testEnd}).Markets() {
		if m.Resolved {
			resolved++
		}
	}
	if resolved == 0 || resolved == 8 {
		t.Fatalf("%d of 8 markets resolved", resolved)
	}
}
