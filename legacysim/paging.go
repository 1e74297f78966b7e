package legacysim

import (
	"math"
	"net/url"
	"sort"
	"strings"
)

// Paging of the wallet lists (activity, deposits_withdrawals and the
// position routes, docs/CONTRACT.md#pagination).
// Lists are stored newest first; a cursor holds the sort key (time, seq)
// of the last item handed out, never an offset.

// walletOf returns the wallet at a well-formed address, or nil: an
// unknown wallet has empty lists, not an error.
func (s *Sim) walletOf(addr string) *wallet {
	if i, ok := s.walletByAddr[strings.ToLower(addr)]; ok {
		return &s.wallets[i]
	}
	return nil
}

// walletIndex is walletOf's index; ok is false for an unknown wallet.
func (s *Sim) walletIndex(addr string) (int, bool) {
	i, ok := s.walletByAddr[strings.ToLower(addr)]
	return i, ok
}

// timeRange reads an inclusive [fromName, toName] range; absent bounds are
// open. An inverted range is not an error on activity and
// deposits_withdrawals (the legacy contract states to >= from for
// orderbook_events only; the edge refuses it everywhere,
// docs/CONTRACT.md#assumptions); it matches nothing.
func timeRange(q url.Values, fromName, toName, unit string) (lo, hi int64, err *apiError) {
	lo, hi = math.MinInt64, math.MaxInt64
	if v, ok, err := intParam(q, fromName, unit); err != nil {
		return 0, 0, err
	} else if ok {
		lo = v
	}
	if v, ok, err := intParam(q, toName, unit); err != nil {
		return 0, 0, err
	} else if ok {
		hi = v
	}
	return lo, hi, nil
}

// pageList pages a newest-first list whose item i has the sort key
// key(i): items stamped after nowS are not visible yet, a cursor resumes
// strictly after its key, and match filters. It returns up to limit
// indexes and whether a further match exists.
func pageList(n int, key func(int) (int64, uint32), nowS int64, after *cursorPos, limit int, match func(int) bool) ([]int, bool) {
	start := sort.Search(n, func(i int) bool { ts, _ := key(i); return ts <= nowS })
	if c := after; c != nil {
		start = max(start, sort.Search(n, func(i int) bool {
			ts, seq := key(i)
			return ts < c.ts || ts == c.ts && seq < c.a
		}))
	}
	page := make([]int, 0, min(limit, n))
	for i := start; i < n; i++ {
		if !match(i) {
			continue
		}
		if len(page) == limit {
			return page, true
		}
		page = append(page, i)
	}
	return page, false
}

// appendListPage writes {"items":[...],"nextCursor":...} from encoded
// items (item(i) is item i's JSON); key gives the sort key of an index in
// page for the cursor.
func appendListPage(dst []byte, item func(int) []byte, page []int, more bool, kind cursorKind, key func(int) (int64, uint32)) []byte {
	dst = append(dst, `{"items":[`...)
	for k, i := range page {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, item(i)...)
	}
	dst = append(dst, ']')
	var last cursorPos
	if len(page) > 0 {
		ts, seq := key(page[len(page)-1])
		last = cursorPos{kind: kind, ts: ts, a: seq}
	}
	return appendNext(dst, last, more && len(page) > 0)
}

func appendEmptyList(dst []byte) []byte {
	return append(dst, `{"items":[],"nextCursor":null}`...)
}

// appendNext closes a list payload with nextCursor: the cursor of the last
// item when more remain, null on the last page
// (docs/CONTRACT.md#pagination).
func appendNext(dst []byte, last cursorPos, more bool) []byte {
	if !more {
		return append(dst, `,"nextCursor":null}`...)
	}
	dst = append(dst, `,"nextCursor":"`...)
	dst = appendCursor(dst, last)
	return append(dst, `"}`...)
}
