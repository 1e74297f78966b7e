package legacysim

import (
	"cmp"
	"sort"
)

// Order book events (docs/CONTRACT.md#shape-orderbook-event, orderbook_events).
// Each token has a `book` snapshot every 10 minutes and `price_change`
// deltas every 15 to 30 seconds in between. The deltas are the only changes
// to the book, and each snapshot is the book after every earlier delta, so
// the reconstruction rule (docs/CONTRACT.md#reconstruction: latest book
// <= T, then the price changes after its cursor up to T) rebuilds exactly
// the book of the next snapshot.
const (
	bookEveryMs = 10 * 60 * 1000
	evBook      = uint8(0)
	evChange    = uint8(1)
	sideBuy     = uint8(0) // bids
	sideSell    = uint8(1) // asks
)

// obEvent is one stored event, kept small (several thousand per token) and
// encoded on the fly; only the snapshots' level lists are stored as JSON.
type obEvent struct {
	ts    int64 // Unix ms
	size  int64 // price_change sizeAfter, hundredths of a share; 0 removes
	snap  int32 // book: index of its snapshot in tokenBook.snapOff
	lag   int32 // indexedTimestamp - timestamp, ms
	kind  uint8
	side  uint8
	price uint8 // price_change level, cents
	spell uint8 // spelling of price and size (variety.go); 0: plain
}

type tokenBook struct {
	events []obEvent // ascending by ts; an event's index is its tiebreak
	// Book event k's `"bids":[...],"asks":[...]` is snapBuf[snapOff[k]:snapOff[k+1]].
	snapBuf []byte
	snapOff []int
	// until (live mode, live.go): every event stamped at or before it is
	// in events.
	until int64
}

// bookTail is the state of a book's generator once it reached End: the
// levels of both sides, and the variety books' last removed prices. Live
// mode goes on from it (live.go).
type bookTail struct {
	side        [2]levels
	lastRemoved [2]int
}

// book returns token t's generated events (up to End), generating them on
// first use.
func (s *Sim) book(t int) *tokenBook {
	tk := &s.tokens[t]
	tk.once.Do(func() {
		var tail bookTail
		if s.variety {
			tk.book, tail = s.genVarietyBook(t)
		} else {
			tk.book, tail = s.genBook(t)
		}
		if s.live != nil {
			tk.live = s.newLiveBook(t, tk.book, &tail)
		}
	})
	return tk.book
}

// bookAt returns token t's events with every event stamped at or before
// nowMs: the generated ones, and in live mode those appended since.
func (s *Sim) bookAt(t int, nowMs int64) *tokenBook {
	b := s.book(t)
	if s.live == nil {
		return b
	}
	return s.tokens[t].live.upTo(s, t, nowMs)
}

// levels holds one side of a book: size in hundredths by price in cents,
// 0 meaning no level. Bids stay in [mid-12, mid-1] and asks in
// [mid+1, mid+12] cents, so the book never crosses.
type levels struct {
	size   [100]int64
	lo, hi int
}

// count returns how many prices of the band have (present) or lack a level.
func (l *levels) count(present bool) int {
	n := 0
	for p := l.lo; p <= l.hi; p++ {
		if (l.size[p] != 0) == present {
			n++
		}
	}
	return n
}

// nth returns the k-th price (from lo) that has (present) or lacks a level.
func (l *levels) nth(present bool, k int) int {
	for p := l.lo; p <= l.hi; p++ {
		if (l.size[p] != 0) == present {
			if k == 0 {
				return p
			}
			k--
		}
	}
	panic("legacysim: level index out of range")
}

func (s *Sim) genBook(ti int) (*tokenBook, bookTail) {
	r := newPRNG(s.seed, streamBook, uint64(ti))
	mid := int(min(97, max(3, (s.basePrice(ti)+centUSD/2)/centUSD)))
	side := [2]*levels{
		{lo: max(1, mid-12), hi: mid - 1},
		{lo: mid + 1, hi: min(99, mid+12)},
	}
	newSize := func() int64 { return r.between(100, 500_000) }
	for _, l := range side {
		for p := l.lo; p <= l.hi; p++ {
			if r.IntN(3) != 0 {
				l.size[p] = newSize()
			}
		}
	}
	lag := func() int32 { return int32(r.between(50, 1500)) }

	startMs, endMs := s.start.UnixMilli(), s.end.UnixMilli()
	slots := int((endMs-startMs)/bookEveryMs) + 1
	b := &tokenBook{
		events:  make([]obEvent, 0, slots*bookEveryMs/22_500+slots),
		snapBuf: make([]byte, 0, slots*300),
		snapOff: make([]int, 1, slots+1),
	}
	for slot := startMs; slot <= endMs; slot += bookEveryMs {
		snapTs := min(endMs, slot+r.Int64N(1000))
		b.events = append(b.events, obEvent{ts: snapTs, kind: evBook, snap: int32(len(b.snapOff) - 1), lag: lag()})
		b.snapBuf = appendLevels(b.snapBuf, side[sideBuy], side[sideSell])
		b.snapOff = append(b.snapOff, len(b.snapBuf))
		next := slot + bookEveryMs // the next snapshot is at or after this
		for t := snapTs + r.between(15_000, 30_000); t < next && t <= endMs; t += r.between(15_000, 30_000) {
			sd := uint8(r.IntN(2))
			p, size := changeLevel(r, side[sd], newSize)
			b.events = append(b.events, obEvent{ts: t, kind: evChange, side: sd, price: uint8(p), size: size, lag: lag()})
		}
	}
	return b, bookTail{side: [2]levels{*side[sideBuy], *side[sideSell]}}
}

// changeLevel applies one random delta to l: a new level, a new size for
// a level, or a removal (size 0). Thin books grow and thick ones shrink.
func changeLevel(r prng, l *levels, newSize func() int64) (price int, size int64) {
	used := l.count(true)
	op := r.IntN(4) // 0, 1: update; 2: add; 3: remove
	switch {
	case used <= 3:
		op = 2
	case used >= 10:
		op = 3
	}
	if op == 2 {
		if free := l.hi - l.lo + 1 - used; free > 0 {
			p := l.nth(false, r.IntN(free))
			l.size[p] = newSize()
			return p, l.size[p]
		}
		op = 0
	}
	p := l.nth(true, r.IntN(used))
	if op == 3 && used > 1 {
		l.size[p] = 0
		return p, 0
	}
	old := l.size[p]
	for l.size[p] == old {
		l.size[p] = newSize()
	}
	return p, l.size[p]
}

// appendLevels writes both sides as [price, size] string pairs on the 0..1
// price scale, best price first.
func appendLevels(dst []byte, bids, asks *levels) []byte {
	return appendSides(dst, bids, asks, func(dst []byte, p int, size int64) []byte {
		dst = append(dst, `["`...)
		dst = appendDec(dst, int64(p), 2)
		dst = append(dst, `","`...)
		dst = appendDec(dst, size, 2)
		return append(dst, `"]`...)
	})
}

// appendSides writes "bids":[...],"asks":[...] with every level that holds
// a size, best price first on each side (bids from the highest, asks from
// the lowest); pair writes one level.
func appendSides(dst []byte, bids, asks *levels, pair func(dst []byte, p int, size int64) []byte) []byte {
	dst = append(dst, `"bids":[`...)
	first := true
	for p := bids.hi; p >= bids.lo; p-- {
		if bids.size[p] != 0 {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = pair(dst, p, bids.size[p])
		}
	}
	dst = append(dst, `],"asks":[`...)
	first = true
	for p := asks.lo; p <= asks.hi; p++ {
		if asks.size[p] != 0 {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = pair(dst, p, asks.size[p])
		}
	}
	return append(dst, ']')
}

// eventFragment is the constant middle of token t's events, from the
// cursor's closing quote to the eventType value's opening quote.
func (s *Sim) eventFragment(t int) []byte {
	tk := &s.tokens[t]
	m := &s.markets[tk.market]
	dst := append([]byte(nil), '"')
	dst = appendField(dst, "marketId", m.id)
	dst = appendField(dst, "conditionId", m.cond)
	dst = appendField(dst, "tokenId", tk.id)
	dst = appendField(dst, "outcome", outcomeName(tk.outcome))
	return append(appendKey(dst, "eventType"), '"')
}

// appendEvent encodes event i of token t with the fields in the
// contract's order, nulls where it says the kind has none
// (docs/CONTRACT.md#shape-orderbook-event).
func (s *Sim) appendEvent(dst []byte, t int, b *tokenBook, i int) []byte {
	e := &b.events[i]
	dst = append(dst, `{"cursor":"`...)
	dst = appendCursor(dst, cursorPos{kind: curOrderbook, ts: e.ts, a: uint32(t), b: uint32(i)})
	dst = append(dst, s.tokens[t].frag...)
	if e.kind == evBook {
		dst = append(dst, `book"`...)
	} else {
		dst = append(dst, `price_change"`...)
	}
	dst = appendIntField(dst, "timestamp", e.ts)
	dst = appendIntField(dst, "indexedTimestamp", e.ts+int64(e.lag))
	if e.kind == evBook {
		dst = append(dst, `,"side":null,"price":null,"sizeAfter":null,`...)
		dst = append(dst, b.snapBuf[b.snapOff[e.snap]:b.snapOff[e.snap+1]]...)
	} else {
		if e.side == sideBuy {
			dst = append(dst, `,"side":"BUY","price":"`...)
		} else {
			dst = append(dst, `,"side":"SELL","price":"`...)
		}
		dst = appendPriceSpelled(dst, int(e.price), e.spell)
		dst = append(dst, `","sizeAfter":"`...)
		dst = appendSizeSpelled(dst, e.size, e.spell)
		dst = append(dst, `","bids":null,"asks":null`...)
	}
	dst = append(dst, `,"sourceHash":"`...)
	dst = appendHash(dst, mix64(s.seed)^mix64(uint64(t)<<32|uint64(i)))
	return append(dst, `"}`...)
}

// obQuery is a validated order book query
// (docs/CONTRACT.md#params-orderbook-events).
type obQuery struct {
	tokens   []int
	kinds    uint8 // bit 1<<evBook, 1<<evChange
	from, to int64 // inclusive, Unix ms
	desc     bool
	limit    int
	after    *cursorPos
}

// obIter walks one token's matching events in the query's order.
type obIter struct {
	tok  int
	b    *tokenBook
	i    int // current event
	end  int // exclusive bound in the walking direction
	step int // +1 asc, -1 desc
}

func (it *obIter) valid() bool { return it.i != it.end }

// skip moves to the next event of a wanted kind.
func (it *obIter) skip(kinds uint8) {
	for it.valid() && kinds&(1<<it.b.events[it.i].kind) == 0 {
		it.i += it.step
	}
}

// keyCmp orders event i of token t against a cursor position: by time,
// then token, then event index, the stable tiebreak of merged tokens.
func keyCmp(ts int64, t, i int, c *cursorPos) int {
	if r := cmp.Compare(ts, c.ts); r != 0 {
		return r
	}
	if r := cmp.Compare(uint32(t), c.a); r != 0 {
		return r
	}
	return cmp.Compare(uint32(i), c.b)
}

// less reports whether a's head comes before b's in ascending key order.
func (it *obIter) less(o *obIter) bool {
	a, b := it.b.events[it.i].ts, o.b.events[o.i].ts
	if a != b {
		return a < b
	}
	return it.tok < o.tok // one token's events never share a timestamp
}

// appendOrderbookPage writes data of orderbook_events: events visible at nowMs
// (timestamp <= now) that match q, merged across tokens.
func (s *Sim) appendOrderbookPage(dst []byte, q *obQuery, nowMs int64) []byte {
	hi := min(q.to, nowMs)
	iters := make([]obIter, 0, len(q.tokens))
	for _, t := range q.tokens {
		b := s.bookAt(t, nowMs)
		ev := b.events
		n := len(ev)
		first := sort.Search(n, func(i int) bool { return ev[i].ts >= q.from })
		past := sort.Search(n, func(i int) bool { return ev[i].ts > hi })
		it := obIter{tok: t, b: b}
		if !q.desc {
			it.i, it.end, it.step = first, max(first, past), 1
			if c := q.after; c != nil {
				it.i = max(it.i, sort.Search(n, func(i int) bool { return keyCmp(ev[i].ts, t, i, c) > 0 }))
				it.i = min(it.i, it.end)
			}
		} else {
			it.i, it.end, it.step = past-1, first-1, -1
			if c := q.after; c != nil {
				it.i = min(it.i, sort.Search(n, func(i int) bool { return keyCmp(ev[i].ts, t, i, c) >= 0 })-1)
			}
			it.i = max(it.i, it.end)
		}
		it.skip(q.kinds)
		if it.valid() {
			iters = append(iters, it)
		}
	}
	next := func() *obIter {
		var best *obIter
		for k := range iters {
			it := &iters[k]
			if !it.valid() {
				continue
			}
			if best == nil || it.less(best) != q.desc {
				best = it
			}
		}
		return best
	}

	dst = append(dst, `{"items":[`...)
	var last cursorPos
	for n := 0; n < q.limit; n++ {
		it := next()
		if it == nil {
			break
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = s.appendEvent(dst, it.tok, it.b, it.i)
		last = cursorPos{kind: curOrderbook, ts: it.b.events[it.i].ts, a: uint32(it.tok), b: uint32(it.i)}
		it.i += it.step
		it.skip(q.kinds)
	}
	return appendNext(append(dst, ']'), last, next() != nil)
}
