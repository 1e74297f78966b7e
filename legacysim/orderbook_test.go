package legacysim

import (
	"encoding/json"
	"maps"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"testing"
)

const obPath = "/open-api/v1/orderbook/events"

type bookState struct{ bids, asks map[string]string }

func levelsOf(t *testing.T, ev json.RawMessage) bookState {
	t.Helper()
	st := bookState{map[string]string{}, map[string]string{}}
	for name, m := range map[string]map[string]string{"bids": st.bids, "asks": st.asks} {
		for _, pair := range field[[][]string](t, ev, name) {
			if len(pair) != 2 {
				t.Fatalf("level %v", pair)
			}
			m[pair[0]] = pair[1]
		}
	}
	return st
}

// reconstruct follows the reconstruction rule
// (docs/CONTRACT.md#reconstruction) for token tok at time T, paging the
// price changes limit at a time.
func reconstruct(t *testing.T, srv *httptest.Server, tok string, T int64, limit int) bookState {
	t.Helper()
	to := strconv.FormatInt(T, 10)
	// (a) the latest book at or before T
	l := get(t, srv, obPath, url.Values{"tokenId": {tok}, "eventType": {"book"}, "to": {to}, "order": {"desc"}, "limit": {"1"}}).list(t)
	if len(l.Items) != 1 {
		t.Fatalf("no book at or before %d", T)
	}
	st := levelsOf(t, l.Items[0])
	// (b), (c) price changes after its cursor up to T, ascending
	q := url.Values{"tokenId": {tok}, "eventType": {"price_change"}, "to": {to}, "order": {"asc"},
		"limit": {strconv.Itoa(limit)}, "cursor": {field[string](t, l.Items[0], "cursor")}}
	for _, ev := range walk(t, srv, obPath, q, limit) {
		// (d) BUY deltas to bids, SELL deltas to asks; "0" removes
		side := st.asks
		if field[string](t, ev, "side") == "BUY" {
			side = st.bids
		}
		if size := field[string](t, ev, "sizeAfter"); size == "0" {
			delete(side, field[string](t, ev, "price"))
		} else {
			side[field[string](t, ev, "price")] = size
		}
	}
	return st
}

func TestBookReconstruction(t *testing.T) {
	s, srv := fixed(t, Config{})
	for _, m := range s.Markets()[:3] {
		for _, tok := range m.Tokens {
			books := walk(t, srv, obPath, url.Values{"tokenId": {tok}, "eventType": {"book"}, "limit": {"10000"}}, 10000)
			if len(books) < 400 {
				t.Fatalf("%d snapshots in 72h", len(books))
			}
			for _, k := range []int{1, 2, len(books) / 2, len(books) - 1} {
				next := books[k]
				T := field[int64](t, next, "timestamp") - 1
				got := reconstruct(t, srv, tok, T, 7)
				want := levelsOf(t, next)
				if !maps.Equal(got.bids, want.bids) || !maps.Equal(got.asks, want.asks) {
					t.Fatalf("token %s snapshot %d: rebuilt %v, snapshot %v", tok, k, got, want)
				}
				if len(want.bids) == 0 || len(want.asks) == 0 {
					t.Errorf("empty side in snapshot %d: %v", k, want)
				}
			}
		}
	}
}

func TestBookLevelsOrdered(t *testing.T) {
	s, srv := fixed(t, Config{})
	books := get(t, srv, obPath, url.Values{"marketId": {s.Markets()[1].ID}, "eventType": {"book"}, "limit": {"50"}}).list(t).Items
	for _, b := range books {
		bids, asks := field[[][]string](t, b, "bids"), field[[][]string](t, b, "asks")
		price := func(l []string) float64 { f, _ := strconv.ParseFloat(l[0], 64); return f }
		for i := 1; i < len(bids); i++ {
			if price(bids[i]) >= price(bids[i-1]) {
				t.Fatalf("bids not best first: %v", bids)
			}
		}
		for i := 1; i < len(asks); i++ {
			if price(asks[i]) <= price(asks[i-1]) {
				t.Fatalf("asks not best first: %v", asks)
			}
		}
		if price(bids[0]) >= price(asks[0]) || price(asks[len(asks)-1]) >= 1 || price(bids[len(bids)-1]) <= 0 {
			t.Fatalf("crossed or out of 0..1: %v %v", bids, asks)
		}
	}
}

func TestOrderbookPaging(t *testing.T) {
	s, srv := fixed(t, Config{})
	m0, m1 := s.Markets()[0], s.Markets()[1]
	from := testEnd.Add(-5 * 3600e9).UnixMilli()
	to := testEnd.Add(-3 * 3600e9).UnixMilli()
	base := url.Values{"marketId": {m0.ID}, "tokenId": {m0.Tokens[0] + "," + m1.Tokens[0], m0.Tokens[1]},
		"from": {strconv.FormatInt(from, 10)}, "to": {strconv.FormatInt(to, 10)}}
	for _, order := range []string{"asc", "desc"} {
		q := cloneValues(base)
		q.Set("order", order)
		q.Set("limit", "10000")
		one := walk(t, srv, obPath, q, 10000)
		q.Set("limit", "37")
		paged := walk(t, srv, obPath, q, 37)
		if len(one) < 500 || len(paged) != len(one) {
			t.Fatalf("%s: %d events in one page, %d paged", order, len(one), len(paged))
		}
		toks := map[string]bool{}
		cursors := map[string]bool{}
		for i, ev := range paged {
			if string(ev) != string(one[i]) {
				t.Fatalf("%s: event %d differs between page sizes", order, i)
			}
			c := field[string](t, ev, "cursor")
			if cursors[c] {
				t.Fatalf("duplicate cursor %s", c)
			}
			cursors[c] = true
			tok := field[string](t, ev, "tokenId")
			toks[tok] = true
			ts := field[int64](t, ev, "timestamp")
			if ts < from || ts > to {
				t.Fatalf("timestamp %d outside [%d, %d]", ts, from, to)
			}
			if i > 0 {
				prev := field[int64](t, paged[i-1], "timestamp")
				if order == "asc" && ts < prev || order == "desc" && ts > prev {
					t.Fatalf("%s: out of order at %d", order, i)
				}
			}
		}
		// marketId AND tokenId: only m0's two tokens, not m1's.
		if len(toks) != 2 || !toks[m0.Tokens[0]] || !toks[m0.Tokens[1]] {
			t.Fatalf("tokens %v", slices.Collect(maps.Keys(toks)))
		}
	}

	// A cursor resumes strictly after its event in the query's order.
	tok := url.Values{"tokenId": {m0.Tokens[0]}, "limit": {"20"}}
	all := get(t, srv, obPath, tok).list(t).Items
	q := cloneValues(tok)
	q.Set("cursor", field[string](t, all[9], "cursor"))
	after := get(t, srv, obPath, q).list(t).Items
	if string(after[0]) != string(all[10]) {
		t.Fatal("asc cursor does not resume at the next event")
	}
	q.Set("order", "DESC")
	before := get(t, srv, obPath, q).list(t).Items
	if len(before) != 9 || string(before[0]) != string(all[8]) || string(before[8]) != string(all[0]) {
		t.Fatalf("desc cursor: %d events", len(before))
	}
}

func TestOrderbookDefaultsAndFilters(t *testing.T) {
	s, srv := fixed(t, Config{})
	m := s.Markets()[2]
	l := get(t, srv, obPath, url.Values{"tokenId": {m.Tokens[0]}}).list(t)
	if len(l.Items) != 1000 || l.NextCursor == nil {
		t.Fatalf("default page: %d items", len(l.Items))
	}
	if n := len(s.book(s.tokenByID[m.Tokens[0]]).events); n < 5000 {
		t.Errorf("%d events per token, want several thousand", n)
	}
	for et, want := range map[string]string{"book": "book", "price_change": "price_change"} {
		for _, ev := range get(t, srv, obPath, url.Values{"conditionId": {m.ConditionID}, "eventType": {et}, "limit": {"300"}}).list(t).Items {
			if got := field[string](t, ev, "eventType"); got != want {
				t.Fatalf("eventType=%s returned %s", et, got)
			}
		}
	}
	// from and to are inclusive.
	ev := l.Items[500]
	ts := strconv.FormatInt(field[int64](t, ev, "timestamp"), 10)
	got := get(t, srv, obPath, url.Values{"tokenId": {m.Tokens[0]}, "from": {ts}, "to": {ts}}).list(t)
	if len(got.Items) != 1 || string(got.Items[0]) != string(ev) || got.NextCursor != nil {
		t.Fatalf("from=to=%s: %d items", ts, len(got.Items))
	}
	// Unknown ids match nothing.
	if l := get(t, srv, obPath, url.Values{"marketId": {"1"}}).list(t); len(l.Items) != 0 || l.NextCursor != nil {
		t.Fatalf("unknown market: %d items", len(l.Items))
	}
}
