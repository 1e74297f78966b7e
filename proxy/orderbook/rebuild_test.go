package orderbook

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
)

func change(ts int64, side, price, size string) event {
	return event{EventType: "price_change", Timestamp: ts, Side: &side, Price: &price, SizeAfter: &size}
}

func snapshot(ts int64, bids, asks [][2]string) event {
	return event{EventType: "book", Timestamp: ts, Bids: bids, Asks: asks}
}

// manyChanges is a snapshot at 1000 and n price changes at 1001, 1002, …
func manyChanges(n int) []event {
	evs := []event{snapshot(1000, [][2]string{{"0.4", "10"}}, [][2]string{{"0.6", "10"}})}
	for i := range n {
		price := []string{"0.41", "0.42", "0.43"}[i%3]
		evs = append(evs, change(1001+int64(i), "BUY", price, "5"))
	}
	return evs
}

func TestRebuildMaxEvents(t *testing.T) {
	for _, tc := range []struct {
		name           string
		changes, max   int
		pageCap        int
		wantErr        bool
		wantMaxFetched int64
	}{
		{"under the bound", 30, 30, 0, false, 30},
		{"one over", 31, 30, 0, true, 31},
		{"far over", 5000, 30, 0, true, 31},
		{"far over in small pages", 5000, 30, 7, true, 31},
		{"exactly at the bound in small pages", 30, 30, 7, false, 30},
		{"over a page", 25_000, 12_000, 0, true, 12_001},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMem("7", manyChanges(tc.changes))
			mem.pageCap = tc.pageCap
			b, err := Rebuild(context.Background(), mem.page, "7", 1<<40, Options{MaxEvents: tc.max})
			if tc.wantErr {
				if e, ok := errors.AsType[*TooManyEventsError](err); !ok || e.Max != tc.max || b != nil {
					t.Fatalf("got %v, %v; want TooManyEventsError{%d}", b, err, tc.max)
				}
			} else if err != nil || b.EventsApplied != tc.changes {
				t.Fatalf("got %v, %v", b, err)
			}
			if got := mem.changes.Load(); got > tc.wantMaxFetched {
				t.Fatalf("fetched %d price changes, at most %d allowed", got, tc.wantMaxFetched)
			}
		})
	}
}

func TestRebuildNoSnapshot(t *testing.T) {
	evs := []event{change(990, "BUY", "0.5", "1"), snapshot(1000, nil, nil), change(1010, "BUY", "0.5", "1")}
	mem := newMem("7", evs)
	for _, T := range []int64{0, 989, 990, 999} {
		if b, err := Rebuild(context.Background(), mem.page, "7", T, Options{}); !errors.Is(err, ErrNoSnapshot) || b != nil {
			t.Fatalf("T=%d: %v, %v", T, b, err)
		}
	}
	// An empty book is a book: snapshot with null sides.
	b, err := Rebuild(context.Background(), mem.page, "7", 1000, Options{})
	if err != nil || len(b.Bids) != 0 || len(b.Asks) != 0 || b.SnapshotTimestamp != 1000 {
		t.Fatalf("%+v, %v", b, err)
	}
	if got := string(b.AppendJSON(nil)); !strings.Contains(got, `"bids":[],"asks":[]`) {
		t.Fatalf("empty sides written as %s", got)
	}
}

func TestRebuildFetchFails(t *testing.T) {
	boom := errors.New("upstream down")
	mem := newMem("7", manyChanges(50))
	mem.pageCap = 10
	for failAt := 1; failAt <= 4; failAt++ {
		calls := 0
		fetch := func(ctx context.Context, q Query) ([]byte, error) {
			if calls++; calls == failAt {
				return nil, boom
			}
			return mem.page(ctx, q)
		}
		if b, err := Rebuild(context.Background(), fetch, "7", 1<<40, Options{}); err != boom || b != nil {
			t.Fatalf("fail at call %d: got %v, %v; want the fetch error unchanged", failAt, b, err)
		}
	}
}

func TestRebuildCanceled(t *testing.T) {
	mem := newMem("7", manyChanges(50))
	mem.pageCap = 10
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	fetch := func(ctx context.Context, q Query) ([]byte, error) {
		if calls++; calls == 2 {
			cancel() // a page that arrives as the client goes away
		}
		return mem.page(ctx, q)
	}
	if b, err := Rebuild(ctx, fetch, "7", 1<<40, Options{}); !errors.Is(err, context.Canceled) || b != nil {
		t.Fatalf("got %v, %v", b, err)
	}
	if calls != 2 {
		t.Fatalf("%d pages fetched after cancellation", calls-2)
	}
}

func TestRebuildBadPages(t *testing.T) {
	const snap = `{"message":"OK","status_code":"1","data":{"items":[{"cursor":"c0","tokenId":"7","eventType":"book","timestamp":1000,"bids":[["0.5","1"]],"asks":null}],"nextCursor":null}}`
	page := func(items string) string {
		return `{"message":"OK","status_code":"1","data":{"items":[` + items + `],"nextCursor":null}}`
	}
	ev := func(members string) string {
		return `{"cursor":"c1","tokenId":"7","eventType":"price_change","timestamp":1001,` + members + `}`
	}
	const ok = `"side":"BUY","price":"0.5","sizeAfter":"2"`
	for _, tc := range []struct{ name, snapshot, changes string }{
		{"not JSON", `<html>`, ""},
		{"truncated", snap[:len(snap)-3], ""},
		{"trailing bytes", snap + `x`, ""},
		{"failure envelope", `{"message":"Rate limit exceeded","status_code":"0","data":null}`, ""},
		{"no data", `{"message":"OK","status_code":"1"}`, ""},
		{"no items", `{"message":"OK","status_code":"1","data":{"nextCursor":null}}`, ""},
		{"two snapshots for limit 1", page(`{"cursor":"c0","tokenId":"7","eventType":"book","timestamp":1000,"bids":[],"asks":[]},{"cursor":"c1","tokenId":"7","eventType":"book","timestamp":999,"bids":[],"asks":[]}`), ""},
		{"snapshot of another token", strings.Replace(snap, `"tokenId":"7"`, `"tokenId":"8"`, 1), ""},
		{"snapshot after T", strings.Replace(snap, `1000`, `99999`, 1), ""},
		{"snapshot without cursor", strings.Replace(snap, `"cursor":"c0",`, ``, 1), ""},
		{"level not a pair", strings.Replace(snap, `["0.5","1"]`, `["0.5"]`, 1), ""},
		{"level price not decimal", strings.Replace(snap, `["0.5","1"]`, `["0.5e1","1"]`, 1), ""},
		{"change missing sizeAfter", snap, page(ev(`"side":"BUY","price":"0.5"`))},
		{"change null price", snap, page(ev(`"side":"BUY","price":null,"sizeAfter":"1"`))},
		{"change side HOLD", snap, page(ev(`"side":"HOLD","price":"0.5","sizeAfter":"1"`))},
		{"change negative size", snap, page(ev(`"side":"SELL","price":"0.5","sizeAfter":"-1"`))},
		{"change price with exponent", snap, page(ev(`"side":"SELL","price":"5E-1","sizeAfter":"1"`))},
		{"change timestamp not integer", snap, page(strings.Replace(ev(ok), `1001`, `1001.5`, 1))},
		{"change before snapshot time", snap, page(strings.Replace(ev(ok), `1001`, `999`, 1))},
		{"change after T", snap, page(strings.Replace(ev(ok), `1001`, `3000`, 1))},
		{"book among changes", snap, page(`{"cursor":"c1","tokenId":"7","eventType":"book","timestamp":1001,"bids":[],"asks":[]}`)},
		{"change of another token", snap, page(strings.Replace(ev(ok), `"tokenId":"7"`, `"tokenId":"77"`, 1))},
		{"empty page with a cursor", snap, `{"message":"OK","status_code":"1","data":{"items":[],"nextCursor":"c9"}}`},
		{"trailing comma", snap, page(ev(ok) + `,`)},
		{"items twice", snap, `{"message":"OK","status_code":"1","data":{"items":[` + ev(ok) + `],"items":[],"nextCursor":null}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fetch := func(_ context.Context, q Query) ([]byte, error) {
				if q.EventType == evBook {
					return []byte(tc.snapshot), nil
				}
				if tc.changes == "" {
					return []byte(page("")), nil
				}
				return []byte(tc.changes), nil
			}
			b, err := Rebuild(context.Background(), fetch, "7", 2000, Options{})
			if !errors.Is(err, ErrBadPage) || b != nil {
				t.Fatalf("got %+v, %v; want ErrBadPage", b, err)
			}
		})
	}
}

func TestRebuildLenientPages(t *testing.T) {
	// What the contract allows in a page, beyond what the edge writes.
	body := " {\n \"status_code\" : \"1\", \"data\" : { \"nextCursor\" : null , \"items\" : [ {\"tok\\u0065nId\":\"7\"," +
		"\"eventType\":\"book\",\"timestamp\":1000,\"cursor\":\"c\\\"0\",\"extra\":{\"a\":[1,{\"b\":\"]}\"}]}," +
		"\"bids\":[[\"0.5\",\"1\"],[\"0.50\",\"3\"],[\"0.4\",\"0\"]],\"asks\":[[\"1.\",\"\\u0032\"]]} ] } , \"message\":\"OK\" } "
	var cursor string
	fetch := func(_ context.Context, q Query) ([]byte, error) {
		if q.EventType == evBook {
			return []byte(body), nil
		}
		cursor = q.Cursor
		return []byte(`{"data":{"items":[],"nextCursor":null}}`), nil
	}
	b, err := Rebuild(context.Background(), fetch, "7", 2000, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"tokenId":"7","at":2000,"snapshotTimestamp":1000,"eventsApplied":0,"crossed":false,` +
		`"bids":[{"price":"0.5","size":"3"}],"asks":[{"price":"1","size":"2"}]}`
	if got := string(b.AppendJSON(nil)); got != want || cursor != `c"0` {
		t.Fatalf("got  %s (cursor %q)\nwant %s", got, cursor, want)
	}
}

func TestRebuildDepthAndCrossed(t *testing.T) {
	evs := []event{
		snapshot(1000, [][2]string{{"0.30", "1"}, {"0.3", "2"}, {"0.1", "5"}, {"0.25", "4"}}, [][2]string{{"0.9", "1"}, {"0.35", "7"}}),
		change(1001, "BUY", "0.2", "3.50"),
		change(1002, "SELL", "0.350", "0"), // removes 0.35
		change(1003, "SELL", "0.7", "0"),   // absent: nothing to remove
		change(1004, "SELL", "0.30", "8"),  // crosses: best bid 0.3 = best ask 0.3
		change(1005, "SELL", "0.3", "0"),   // uncrossed again
		change(1006, "BUY", "1", "2"),      // crossed: bid 1 above ask 0.9
	}
	mem := newMem("7", evs)
	for _, tc := range []struct {
		at      int64
		depth   int
		want    string
		crossed bool
	}{
		{1003, 0, `"bids":[{"price":"0.3","size":"2"},{"price":"0.25","size":"4"},{"price":"0.2","size":"3.50"},{"price":"0.1","size":"5"}],"asks":[{"price":"0.9","size":"1"}]`, false},
		{1003, 2, `"bids":[{"price":"0.3","size":"2"},{"price":"0.25","size":"4"}],"asks":[{"price":"0.9","size":"1"}]`, false},
		{1004, 1, `"bids":[{"price":"0.3","size":"2"}],"asks":[{"price":"0.3","size":"8"}]`, true},
		{1005, 1, `"bids":[{"price":"0.3","size":"2"}],"asks":[{"price":"0.9","size":"1"}]`, false},
		{1006, 1, `"bids":[{"price":"1","size":"2"}],"asks":[{"price":"0.9","size":"1"}]`, true},
	} {
		b, err := Rebuild(context.Background(), mem.page, "7", tc.at, Options{Depth: tc.depth})
		if err != nil {
			t.Fatal(err)
		}
		got := string(b.AppendJSON(nil))
		if !strings.HasSuffix(got, `,`+tc.want+`}`) || b.Crossed != tc.crossed {
			t.Fatalf("at %d depth %d: %s, crossed %v\nwant %s, crossed %v", tc.at, tc.depth, got, b.Crossed, tc.want, tc.crossed)
		}
		checkRebuild(t, mem.page, mem.events, "7", tc.at, Options{})
	}
}

func TestAppendJSON(t *testing.T) {
	b := &Book{TokenID: "7\"<x>", At: 1700000005000, SnapshotTimestamp: 1700000000000, EventsApplied: 42,
		Bids: []Level{{"0.78", "100"}}, Asks: []Level{{"0.8", "40"}}}
	want := `{"tokenId":"7\"<x>","at":1700000005000,"snapshotTimestamp":1700000000000,"eventsApplied":42,"crossed":false,` +
		`"bids":[{"price":"0.78","size":"100"}],"asks":[{"price":"0.8","size":"40"}]}`
	if got := string(b.AppendJSON([]byte("x"))); got != "x"+want {
		t.Fatalf("got  %s\nwant x%s", got, want)
	}
}

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"0.5": "0.5", "0.50": "0.5", "00.500": "0.5", "1.00": "1", "1.": "1", "0": "0", "000": "0",
		"0.000": "0", "10": "10", "010.010": "10.01", "0.05": "0.05", "7": "7",
	} {
		got, err := canonical([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("canonical(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", ".", ".5", "-1", "+1", "1e3", "0x1", "1.2.3", "1 ", "½"} {
		if got, err := canonical([]byte(in)); err == nil {
			t.Errorf("canonical(%q) = %q, want an error", in, got)
		}
	}
	for _, tc := range []struct {
		a, b string
		want int
	}{{"0.5", "0.55", -1}, {"0.6", "0.55", 1}, {"1", "0.99", 1}, {"10", "9.9", 1}, {"0.5", "0.5", 0}, {"1", "1.01", -1}} {
		if got := compareCanonical(tc.a, tc.b); got != tc.want {
			t.Errorf("compare(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// FuzzPage feeds arbitrary bodies to the page reader: it must end, not
// panic, and reject what is not an object with data.
func FuzzPage(f *testing.F) {
	f.Add([]byte(`{"message":"OK","status_code":"1","data":{"items":[{"cursor":"c0","tokenId":"7","eventType":"book","timestamp":1000,"bids":[["0.5","1"]],"asks":null}],"nextCursor":null}}`))
	f.Add([]byte(`{"data":{"items":[{"tokenId":"7","eventType":"price_change","timestamp":5,"side":"BUY","price":"0.5","sizeAfter":"0"}],"nextCursor":"x\u0041"}}`))
	f.Add([]byte(`{"data":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, want := range []string{evBook, evChange} {
			for _, at := range []int64{2000, 1500} { // exact bound, aligned bound
				for _, desc := range []bool{false, true} {
					r := newReader("7", at, 2000)
					r.desc = desc
					pg, err := r.page(body, 3, want)
					if err == nil && (pg.items > 3 || pg.past > pg.items) {
						t.Fatalf("%d items (%d past) accepted with limit 3", pg.items, pg.past)
					}
				}
			}
		}
	})
}

// TestSideMemoryBounded: levels that come and go at ever new prices leave
// no trail, so memory follows the live book, not the stream.
func TestSideMemoryBounded(t *testing.T) {
	s := newSide()
	for i := range 100_000 {
		p := []byte("0." + strings.Repeat("0", i%5) + strconv.Itoa(i+1))
		c, err := canonical(p)
		if err != nil {
			t.Fatal(err)
		}
		s.set(c, []byte("1"), false)
		s.set(c, []byte("0"), true)
		if i%1000 == 0 {
			s.set(c, []byte("2"), false) // a few stay
		}
	}
	if s.live != 100 || len(s.levels) > 2*s.live+tombstoneSlack+1 || len(s.idx) != len(s.levels) {
		t.Fatalf("%d live levels, %d kept, %d indexed", s.live, len(s.levels), len(s.idx))
	}
	if got := s.sorted(false, 0); len(got) != 100 || got[0].Price != "0.1" || got[0].Size != "2" {
		t.Fatalf("sorted: %d levels, first %+v", len(got), got[0])
	}
}
