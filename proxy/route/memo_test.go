package route

import (
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// remember validates target on tb as the edge does and remembers it,
// with the target and its query in a buffer that is overwritten after:
// the edge's own target buffer is reused by the next request.
func remember(t *testing.T, tb *Table, target string, legacy bool) {
	t.Helper()
	buf := []byte(target)
	view := unsafe.String(&buf[0], len(buf)) // as the edge views its buffer
	req, h := tb.Recall(view, legacy)
	if req != nil {
		t.Fatalf("%s: remembered before it was validated", target)
	}
	path, query, _ := strings.Cut(view, "?")
	match := tb.Match
	validate := (*Route).ValidateInto
	if legacy {
		match, validate = tb.MatchLegacy, (*Route).ValidateLegacyInto
	}
	rt, param := match(path)
	if rt == nil {
		t.Fatalf("%s: no route", target)
	}
	var mine Request
	if err := validate(rt, &mine, param, query); err != nil {
		t.Fatalf("%s: %v", target, err)
	}
	tb.Remember(h, view, legacy, &mine)
	mine = Request{}
	clear(buf)
}

// What Recall returns is what Match and Validate returned, copied out of
// the memory the caller reuses, for /v1 and legacy targets alike.
func TestMemoRecallsWhatValidated(t *testing.T) {
	tb := NewTable()
	for _, tc := range []struct {
		target string
		legacy bool
	}{
		{"/v1/trader/0x" + strings.ToUpper(addr[2:]) + "/activity?limit=7&toTimestamp=9", false},
		{LegacyPrefix + "/v1/trader/" + addr + "/activity?limit=7&toTimestamp=9", true},
		{"/v1/tx/" + hash, false},
		{"/v1/orderbook/events?tokenId=" + token + "&limit=1000", false},
	} {
		path, query, _ := strings.Cut(tc.target, "?")
		match, validate := tb.Match, (*Route).Validate
		if tc.legacy {
			match = tb.MatchLegacy
			validate = func(rt *Route, p, q string) (*Request, error) {
				r := &Request{}
				return r, rt.ValidateLegacyInto(r, p, q)
			}
		}
		rt, param := match(path)
		want, err := validate(rt, param, query)
		if err != nil {
			t.Fatal(err)
		}
		remember(t, tb, tc.target, tc.legacy)
		got, _ := tb.Recall(tc.target, tc.legacy)
		if got == nil {
			t.Fatalf("%s: not remembered", tc.target)
		}
		if got.Route != want.Route || got.Key != want.Key || got.RawQuery != want.RawQuery ||
			got.PathParam != want.PathParam || got.Legacy != want.Legacy || got.Upper != want.Upper ||
			got.HasUpper != want.HasUpper || got.Cursor != want.Cursor || got.SuccessorPath() != want.SuccessorPath() ||
			got.UpstreamPath() != want.UpstreamPath() || got.Param("limit") != want.Param("limit") {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.target, got, want)
		}
		if other, _ := tb.Recall(tc.target, !tc.legacy); other != nil {
			t.Errorf("%s: recalled for the other API", tc.target)
		}
	}
}

// A slot held by a hot target goes to another only on that target's
// second miss with no other target missing in between: targets asked
// once each leave it alone.
func TestMemoDoorkeeper(t *testing.T) {
	tb := NewTable()
	tb.memo = newMemo(1) // one slot: every target shares it
	hot := "/v1/tx/" + hash
	remember(t, tb, hot, false)
	for i := range 50 {
		once := "/v1/tx/0x" + strings.Repeat("3", 63) + string(rune('a'+i%6))
		if i%6 == 0 {
			once = "/v1/trader/" + addr + "/activity?limit=" + string(rune('1'+i%9))
		}
		remember(t, tb, once, false)
		if r, _ := tb.Recall(hot, false); r == nil {
			t.Fatalf("after %d targets asked once, the hot one is gone", i+1)
		}
	}
	// Twice in a row: it takes the slot.
	next := "/v1/trader/" + addr + "/activity?limit=3&toTimestamp=100"
	remember(t, tb, next, false)
	remember(t, tb, next, false)
	if r, _ := tb.Recall(next, false); r == nil || r.Param("limit") != "3" {
		t.Fatalf("asked twice, not remembered: %+v", r)
	}
	if r, _ := tb.Recall(hot, false); r != nil {
		t.Errorf("one slot holds two targets")
	}
}

// Recall and Remember run at once on every request: under -race, a
// remembered request must be safe to read while others are stored.
func TestMemoConcurrent(t *testing.T) {
	tb := NewTable()
	tb.memo = newMemo(4)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				target := "/v1/trader/" + addr + "/activity?limit=" + string(rune('1'+(g+i)%9))
				path, query, _ := strings.Cut(target, "?")
				r, h := tb.Recall(target, false)
				if r != nil {
					if r.Param("limit") != query[len("limit="):] {
						t.Errorf("%s: recalled limit %s", target, r.Param("limit"))
					}
					continue
				}
				rt, param := tb.Match(path)
				var req Request
				if err := rt.ValidateInto(&req, param, query); err != nil {
					t.Error(err)
					return
				}
				tb.Remember(h, target, false, &req)
			}
		})
	}
	wg.Wait()
}

// A target padded with parameters the route drops is validated every
// time, never kept: 4,096 of them at the edge's 8 KiB limit would make
// the memo hold 32 MiB.
func TestMemoKeepsNoLongTarget(t *testing.T) {
	tb := NewTable()
	long := "/v1/tx/" + hash + "?pad=" + strings.Repeat("p", memoMaxTarget)
	for range 2 {
		r, h := tb.Recall(long, false)
		if r != nil {
			t.Fatal("a long target was remembered")
		}
		rt, param := tb.Match("/v1/tx/" + hash)
		var req Request
		if err := rt.ValidateInto(&req, param, "pad="+strings.Repeat("p", memoMaxTarget)); err != nil {
			t.Fatal(err)
		}
		tb.Remember(h, long, false, &req)
	}
	if r, _ := tb.Recall(long, false); r != nil {
		t.Error("a long target was remembered")
	}
	for i := range tb.memo.slots {
		if tb.memo.slots[i].entry.Load() != nil {
			t.Fatal("a slot holds the long target")
		}
	}
}
