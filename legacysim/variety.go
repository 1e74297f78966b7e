package legacysim

import "strconv"

// Order books with Config.OrderBookVariety: event streams that exercise
// every case a book rebuild meets, where the default books are tidy. Per
// token: a delta every 100 to 600 ms, some in the millisecond of the event
// before (a snapshot too); no snapshot in slots 2 to 8, so that more than
// 10,000 deltas, several full pages, lie between two; updates, new levels,
// removals, re-adds, and removals of a price the book lacks; one price in
// several spellings ("0.5", "0.50"); bid and ask bands that meet (bid =
// ask); snapshots that disagree with the deltas before them, so the book
// after a snapshot is the snapshot, never a merge. A rebuild by the rule
// of docs/CONTRACT.md#reconstruction equals applying every event in order.
const (
	varietyGapFrom = 2 // slots [varietyGapFrom, varietyGapTo) have no snapshot
	varietyGapTo   = 9
)

// Spelling flags of a variety event (obEvent.spell); 0 is the plain
// spelling of the default books.
const (
	spellZeros = 3 // mask: trailing zeros added to the price
	spellFixed = 4 // size written with two decimals ("12.50", "0.00")
)

func (s *Sim) genVarietyBook(ti int) (*tokenBook, bookTail) {
	r := newPRNG(s.seed, streamBookVariety, uint64(ti))
	// Which slots have a snapshot is drawn from a stream of its own, so
	// that it does not hang on the draws of the deltas before.
	slots := newPRNG(s.seed, streamBookVariety, uint64(ti)|1<<32)
	mid := int(min(95, max(5, (s.basePrice(ti)+centUSD/2)/centUSD)))
	side := [2]*levels{
		{lo: max(1, mid-12), hi: mid},
		{lo: mid, hi: min(99, mid+12)},
	}
	newSize := func() int64 { return r.between(1, 500_000) }
	for _, l := range side {
		for p := l.lo; p <= l.hi; p++ {
			if r.IntN(3) == 0 {
				l.size[p] = newSize()
			}
		}
	}
	lag := func() int32 { return int32(r.between(50, 1500)) }
	var lastRemoved [2]int // price removed last per side, 0: none

	startMs, endMs := s.start.UnixMilli(), s.end.UnixMilli()
	b := &tokenBook{snapOff: make([]int, 1)}
	t := startMs
	for slot, k := startMs, 0; slot <= endMs; slot, k = slot+bookEveryMs, k+1 {
		if k < varietyGapFrom || k >= varietyGapTo && slots.IntN(3) != 0 {
			snapTs := max(t, min(endMs, slot+r.Int64N(1000)))
			if n := len(b.events); n > 0 && r.IntN(4) == 0 {
				snapTs = b.events[n-1].ts // same millisecond as the delta before
			}
			if k == 1 || k > 1 && r.IntN(3) == 0 {
				for _, l := range side {
					resync(r, l, newSize)
				}
			}
			b.events = append(b.events, obEvent{ts: snapTs, kind: evBook, snap: int32(len(b.snapOff) - 1), lag: lag()})
			b.snapBuf = appendVarietyLevels(b.snapBuf, r, side[sideBuy], side[sideSell])
			b.snapOff = append(b.snapOff, len(b.snapBuf))
			t = snapTs
		}
		next := slot + bookEveryMs
		for {
			if r.IntN(20) != 0 {
				t += r.between(100, 600)
			}
			if t >= next || t > endMs {
				break
			}
			sd := uint8(r.IntN(2))
			p, size := varietyChange(r, side[sd], &lastRemoved[sd], newSize)
			spell := uint8(r.IntN(3))
			if r.IntN(4) == 0 {
				spell |= spellFixed
			}
			b.events = append(b.events, obEvent{ts: t, kind: evChange, side: sd, price: uint8(p), size: size, lag: lag(), spell: spell})
		}
		t = max(t, next)
	}
	return b, bookTail{side: [2]levels{*side[sideBuy], *side[sideSell]}, lastRemoved: lastRemoved}
}

// varietyChange applies one random delta to l and returns it: an update
// (35%), a new level (25%), a removal (20%), a re-add of the price removed
// last (10%) or a removal of a price l lacks (10%, l unchanged).
func varietyChange(r prng, l *levels, lastRemoved *int, newSize func() int64) (price int, size int64) {
	used := l.count(true)
	free := l.hi - l.lo + 1 - used
	op := r.IntN(20)
	switch {
	case used <= 2 && free > 0:
		op = 7 // add
	case free <= 2:
		op = 12 // remove
	}
	switch {
	case op >= 18 && free > 0: // remove what is not there
		return l.nth(false, r.IntN(free)), 0
	case op >= 16 && *lastRemoved != 0 && l.size[*lastRemoved] == 0: // re-add
		p := *lastRemoved
		l.size[p] = newSize()
		return p, l.size[p]
	case op >= 12 && used > 1: // remove
		p := l.nth(true, r.IntN(used))
		l.size[p] = 0
		*lastRemoved = p
		return p, 0
	case op >= 7 && free > 0: // add
		p := l.nth(false, r.IntN(free))
		l.size[p] = newSize()
		return p, l.size[p]
	}
	p := l.nth(true, r.IntN(used))
	old := l.size[p]
	for l.size[p] == old {
		l.size[p] = newSize()
	}
	return p, l.size[p]
}

// resync changes l without deltas, as a snapshot taken after a missed
// update shows it: one level dropped and one added, when there is room.
func resync(r prng, l *levels, newSize func() int64) {
	if used := l.count(true); used > 2 {
		l.size[l.nth(true, r.IntN(used))] = 0
	}
	if free := l.hi - l.lo + 1 - l.count(true); free > 0 {
		l.size[l.nth(false, r.IntN(free))] = newSize()
	}
}

// appendVarietyLevels is appendLevels with random spellings per level.
func appendVarietyLevels(dst []byte, r prng, bids, asks *levels) []byte {
	return appendSides(dst, bids, asks, func(dst []byte, p int, size int64) []byte {
		spell := uint8(r.IntN(3)) | uint8(r.IntN(2))*spellFixed
		dst = append(dst, `["`...)
		dst = appendPriceSpelled(dst, p, spell)
		dst = append(dst, `","`...)
		dst = appendSizeSpelled(dst, size, spell)
		return append(dst, `"]`...)
	})
}

// appendPriceSpelled writes a price in cents on the 0..1 scale. Prices
// are 1 to 99 cents, so there is always a fraction to pad with zeros.
func appendPriceSpelled(dst []byte, price int, spell uint8) []byte {
	dst = appendDec(dst, int64(price), 2)
	for range spell & spellZeros {
		dst = append(dst, '0')
	}
	return dst
}

func appendSizeSpelled(dst []byte, size int64, spell uint8) []byte {
	if spell&spellFixed == 0 {
		return appendDec(dst, size, 2)
	}
	dst = strconv.AppendInt(dst, size/100, 10)
	frac := size % 100
	return append(dst, '.', byte('0'+frac/10), byte('0'+frac%10))
}
