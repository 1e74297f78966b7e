package orderbook

import (
	"context"
	"testing"
	"time"
)

// Spellings the fuzzer draws from: several of each value, so that levels
// must be matched by value, and zeros that remove.
var (
	fuzzPrices = []string{"0.5", "0.50", "0.500", "00.5", "0.05", "0.050", "0.55", "1", "1.0", "1.",
		"0", "0.01", "0.010", "0.99", "0.1", "0.10", "10", "0.4999999999999999999999"}
	fuzzSizes = []string{"0", "0.00", "0.0", "1", "1.0", "1.50", "1.5", "200", "12.34", "0.01", "007"}
)

// fuzzEvents turns bytes into one token's event stream, ascending by
// timestamp (several events may share a millisecond): per event, one byte
// for the time step (top 2 bits) and the kind, then the kind's operands.
func fuzzEvents(data []byte) []event {
	var evs []event
	ts := int64(1000)
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	for len(data) > 0 {
		b := next()
		ts += int64(b >> 6)
		if b&0x3f < 8 { // a snapshot of up to 7 levels
			e := event{EventType: "book", Timestamp: ts, Bids: [][2]string{}, Asks: [][2]string{}}
			for n := next() & 7; n > 0; n-- {
				l := next()
				pair := [2]string{fuzzPrices[int(l>>1)%len(fuzzPrices)], fuzzSizes[int(next())%len(fuzzSizes)]}
				if l&1 == 0 {
					e.Bids = append(e.Bids, pair)
				} else {
					e.Asks = append(e.Asks, pair)
				}
			}
			evs = append(evs, e)
			continue
		}
		side, price, size := "SELL", fuzzPrices[int(next())%len(fuzzPrices)], fuzzSizes[int(next())%len(fuzzSizes)]
		if b&1 == 0 {
			side = "BUY"
		}
		evs = append(evs, event{EventType: "price_change", Timestamp: ts, Side: &side, Price: &price, SizeAfter: &size})
	}
	return evs
}

func FuzzRebuild(f *testing.F) {
	f.Add([]byte{}, uint16(10), uint8(0), uint8(0))
	// snapshot of 0.5 bid, then 0.50 bid replaced, then 0.500 removed
	f.Add([]byte{0x42, 1, 0, 3, 0x48, 1, 5, 0x48, 2, 0}, uint16(10), uint8(0), uint8(0))
	// removal of an absent level, re-add, crossed book, paged one by one
	f.Add([]byte{0x00, 2, 0, 3, 3, 4, 0x49, 7, 0, 0x48, 7, 4, 0x49, 14, 3, 0x48, 13, 2}, uint16(20), uint8(1), uint8(0))
	// two snapshots in one millisecond, changes before and after each
	f.Add([]byte{0x48, 0, 3, 0x00, 1, 0, 6, 0x09, 2, 2, 0x00, 1, 2, 7, 0x08, 0, 0, 0x49, 3, 3}, uint16(5), uint8(2), uint8(0))
	// more changes than MaxEvents
	f.Add([]byte{0x40, 0, 0x48, 1, 1, 0x48, 2, 2, 0x48, 3, 3, 0x48, 4, 4, 0x48, 5, 5}, uint16(100), uint8(2), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, tOff uint16, pageCap uint8, maxEvents uint8) {
		if len(data) > 4096 {
			return
		}
		mem := newMem("42", fuzzEvents(data))
		mem.pageCap = int(pageCap % 8)
		opt := Options{MaxEvents: int(maxEvents % 64)}
		T := 995 + int64(tOff%4096)
		checkRebuild(t, mem.page, mem.events, "42", T, opt)
		if opt.MaxEvents > 0 && mem.changes.Load() > int64(opt.MaxEvents)+1 {
			t.Fatalf("%d price changes fetched with MaxEvents %d", mem.changes.Load(), opt.MaxEvents)
		}
		// On a bound rounded up to align, past events and snapshots after
		// T included, the same answer.
		align := time.Duration(pageCap>>3+1) * time.Millisecond
		mem.changes.Store(0)
		checkAligned(t, mem.page, "42", T, opt, align)
		if opt.MaxEvents > 0 && mem.changes.Load() > 2*(int64(opt.MaxEvents)+1) {
			t.Fatalf("%d price changes fetched by two rebuilds with MaxEvents %d", mem.changes.Load(), opt.MaxEvents)
		}
		// A depth keeps the best levels of the full book.
		if depth := int(tOff%3) + 1; len(mem.events) > 0 {
			full, err := Rebuild(context.Background(), mem.page, "42", T, opt)
			if err != nil {
				return
			}
			cut, err := Rebuild(context.Background(), mem.page, "42", T, Options{Depth: depth, MaxEvents: opt.MaxEvents})
			if err != nil {
				t.Fatal(err)
			}
			if !equalPrefix(cut.Bids, full.Bids, depth) || !equalPrefix(cut.Asks, full.Asks, depth) || cut.Crossed != full.Crossed {
				t.Fatalf("depth %d: %+v, full %+v", depth, cut, full)
			}
		}
	})
}

func equalPrefix(cut, full []Level, depth int) bool {
	n := min(depth, len(full))
	if len(cut) != n {
		return false
	}
	for i := range n {
		if cut[i] != full[i] {
			return false
		}
	}
	return true
}
