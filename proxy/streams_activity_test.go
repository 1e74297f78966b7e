package proxy_test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// activityHost is a legacy host the test controls, serving one trader's
// activity newest first, as the legacy contract says, with its filters
// (fromTimestamp, toTimestamp), page size and cursor; items are added as
// the test goes. Every other path is 404.
type activityHost struct {
	mu    sync.Mutex
	items []hostItem // oldest first
	calls int
}

type hostItem struct {
	ts   int64
	seq  int
	body string // variant B JSON
}

// add appends items stamped ts: each entry is a txHash and a size, so
// that some items share a transaction and some are equal in every byte.
func (h *activityHost) add(ts int64, items ...[2]string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, it := range items {
		body := fmt.Sprintf(`{"blockTimestamp":%d,"actionType":"Buy","price":"50","size":"%s","fee":0,"usdcSize":"1","netSharesTransferred":"%s",`+
			`"txHash":"%s","tokenId":"1","marketId":"2","marketSlug":"m","eventSlug":"e","conditionId":"0x%064x","marketTitle":"t",`+
			`"positionSide":"Yes","outcomeIndex":0,"logo":"l","traderAddress":"%s","liquidityRole":"TAKER"}`, ts, it[1], it[1], it[0], 7, trader)
		h.items = append(h.items, hostItem{ts: ts, seq: len(h.items), body: body})
	}
}

const trader = "0x00000000000000000000000000000000000000aa"

func (h *activityHost) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/open-api/v1/trader/"+trader+"/activity" {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	num := func(name string, def int64) int64 {
		if v := q.Get(name); v != "" {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
		return def
	}
	lo, hi, limit := num("fromTimestamp", 0), num("toTimestamp", 1<<62), int(num("limit", 50))
	afterTs, afterSeq := int64(1<<62), 1<<30
	if c := q.Get("cursor"); c != "" {
		ts, seq, _ := strings.Cut(c, ":")
		afterTs, _ = strconv.ParseInt(ts, 10, 64)
		afterSeq, _ = strconv.Atoi(seq)
	}
	h.mu.Lock()
	h.calls++
	var page []hostItem
	more := false
	for i := len(h.items) - 1; i >= 0; i-- {
		it := h.items[i]
		if it.ts < lo || it.ts > hi || it.ts > afterTs || it.ts == afterTs && it.seq >= afterSeq {
			continue
		}
		if len(page) == limit {
			more = true
			break
		}
		page = append(page, it)
	}
	h.mu.Unlock()
	var b strings.Builder
	b.WriteString(`{"success":true,"code":"0","message":"success","data":{"items":[`)
	for i, it := range page {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(it.body)
	}
	b.WriteString(`],"nextCursor":`)
	if more {
		last := page[len(page)-1]
		fmt.Fprintf(&b, `"%d:%d"`, last.ts, last.seq)
	} else {
		b.WriteString("null")
	}
	b.WriteString("}}")
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(b.String()))
}

func hash(n int) string { return fmt.Sprintf("0x%064x", n) }

// The activity stream's ids are made from what the contract gives
// (blockTimestamp, txHash, and the item's number among that second's and
// transaction's items, in the order of their bytes): items that share a
// second or a transaction, items equal in every byte, and a second with
// more items than a page all arrive once, in order, and a stream resumed
// from any of their ids goes on with exactly the rest.
func TestActivityStreamIDs(t *testing.T) {
	host := &activityHost{}
	now := time.Now().Unix()
	host.add(now-100, [2]string{hash(1), "1"}, [2]string{hash(1), "2"})
	e := newEdge(t, withUpstream(func(http.Handler) http.Handler { return host }))
	path := "/v1/trader/" + trader + "/activity/stream"
	resp, r := openStream(t, e, path)
	if resp.StatusCode != 200 {
		t.Fatalf("%d", resp.StatusCode)
	}
	// One second: three transactions, one of them with 120 items (more
	// than a page), two items equal in every byte; then the next second.
	var batch [][2]string
	for i := range 120 {
		batch = append(batch, [2]string{hash(2), strconv.Itoa(i)})
	}
	batch = append(batch, [2]string{hash(3), "5"}, [2]string{hash(3), "5"}, [2]string{hash(4), "9"})
	host.add(now-50, batch...)
	host.add(now-40, [2]string{hash(2), "1"}, [2]string{hash(5), "1"})
	got := readEvents(t, r, len(batch)+2)
	var ids []string
	for _, ev := range got {
		if ev.event != "activity" {
			t.Fatalf("event named %q", ev.event)
		}
		ids = append(ids, ev.id)
	}
	if !slices.IsSortedFunc(ids, compareIDs) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Fatalf("ids not in order or repeated: %v", ids)
	}
	wantFirst := strconv.FormatInt(now-50, 10) + "-" + hash(2) + "-0"
	if ids[0] != wantFirst || ids[len(ids)-1] != strconv.FormatInt(now-40, 10)+"-"+hash(5)+"-0" {
		t.Fatalf("first %s, last %s", ids[0], ids[len(ids)-1])
	}
	// The two equal items are told apart by their number.
	if n := slices.Index(ids, strconv.FormatInt(now-50, 10)+"-"+hash(3)+"-1"); n < 0 || got[n].data != got[n-1].data {
		t.Fatalf("the second of two equal items: %d", n)
	}
	// Resumed from ids inside the crowded second: exactly the rest.
	for _, k := range []int{0, 57, 119, 121, len(ids) - 2} {
		_, r2 := openStream(t, e, path, "Last-Event-ID", ids[k])
		rest := readEvents(t, r2, len(ids)-k-1)
		for i, ev := range rest {
			if ev.id != ids[k+1+i] || ev.data != got[k+1+i].data {
				t.Fatalf("resumed after %d: event %d is %s, want %s", k, i, ev.id, ids[k+1+i])
			}
		}
	}
}

// compareIDs orders activity ids as the stream does: time, hash, number.
func compareIDs(a, b string) int {
	pa, pb := strings.Split(a, "-"), strings.Split(b, "-")
	ta, _ := strconv.ParseInt(pa[0], 10, 64)
	tb, _ := strconv.ParseInt(pb[0], 10, 64)
	na, _ := strconv.Atoi(pa[2])
	nb, _ := strconv.Atoi(pb[2])
	switch {
	case ta != tb:
		return int(ta - tb)
	case pa[1] != pb[1]:
		return strings.Compare(pa[1], pb[1])
	}
	return na - nb
}
