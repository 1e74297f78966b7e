package orderbook

import (
	"slices"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// Book is one outcome token's level-2 book at a time, rebuilt by Rebuild.
type Book struct {
	TokenID           string
	At                int64   // the requested time, Unix ms
	SnapshotTimestamp int64   // timestamp of the book event the rebuild started from, Unix ms
	EventsApplied     int     // price changes read after the snapshot, up to At
	Bids              []Level // best (highest) price first
	Asks              []Level // best (lowest) price first
	// Crossed: both sides have levels and the best bid is at or above the
	// best ask, which a consistent feed never shows; reported, not fixed.
	Crossed bool
}

// Level is one price level. Price is in canonical form (no trailing zeros
// or point: "0.50" is written "0.5"); Size is spelled exactly as the last
// event that set it wrote it.
type Level struct {
	Price, Size string
}

// AppendJSON appends the book as the data object of the edge's answer:
//
//	{"tokenId":"…","at":…,"snapshotTimestamp":…,"eventsApplied":…,"crossed":…,
//	 "bids":[{"price":"…","size":"…"}],"asks":[…]}
func (b *Book) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"tokenId":`...)
	// AppendQuote still writes a valid JSON string (with U+FFFD) for
	// invalid UTF-8 and only reports it; the token id was matched byte for
	// byte against the events, so there is nothing better to write.
	dst, _ = jsontext.AppendQuote(dst, b.TokenID)
	dst = append(dst, `,"at":`...)
	dst = strconv.AppendInt(dst, b.At, 10)
	dst = append(dst, `,"snapshotTimestamp":`...)
	dst = strconv.AppendInt(dst, b.SnapshotTimestamp, 10)
	dst = append(dst, `,"eventsApplied":`...)
	dst = strconv.AppendInt(dst, int64(b.EventsApplied), 10)
	dst = append(dst, `,"crossed":`...)
	dst = strconv.AppendBool(dst, b.Crossed)
	dst = append(dst, `,"bids":`...)
	dst = appendLevels(dst, b.Bids)
	dst = append(dst, `,"asks":`...)
	dst = appendLevels(dst, b.Asks)
	return append(dst, '}')
}

func appendLevels(dst []byte, ls []Level) []byte {
	dst = append(dst, '[')
	for i, l := range ls {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"price":`...)
		dst, _ = jsontext.AppendQuote(dst, l.Price)
		dst = append(dst, `,"size":`...)
		dst, _ = jsontext.AppendQuote(dst, l.Size)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// side is one side of the book being rebuilt, keyed by canonical price.
// A removed level stays in the slice as a tombstone, so that the usual
// remove-then-re-add of a price costs no allocation; tombstones are
// dropped once they outnumber the live levels, which keeps memory in
// proportion to the book, not to the number of distinct prices seen.
type side struct {
	idx    map[string]int32
	levels []level
	live   int
}

type level struct {
	price string // canonical
	size  []byte // as the event wrote it; reused across updates
	live  bool
}

// tombstoneSlack is how many dead levels are kept beyond the live count.
const tombstoneSlack = 64

func newSide() side { return side{idx: make(map[string]int32)} }

// reset empties the side: a snapshot replaces the book, never merges.
func (s *side) reset() {
	clear(s.idx)
	s.levels = s.levels[:0]
	s.live = 0
}

// set applies one level update: price is canonical, size the size as
// written and zero tells whether its value is 0, which removes the level
// (a no-op when the level is absent).
func (s *side) set(price, size []byte, zero bool) {
	i, ok := s.idx[string(price)]
	if zero {
		if ok && s.levels[i].live {
			s.levels[i].live = false
			s.live--
			if len(s.levels)-s.live > s.live+tombstoneSlack {
				s.compact()
			}
		}
		return
	}
	if ok {
		l := &s.levels[i]
		l.size = append(l.size[:0], size...)
		if !l.live {
			l.live = true
			s.live++
		}
		return
	}
	s.idx[string(price)] = int32(len(s.levels))
	s.levels = append(s.levels, level{price: string(price), size: slices.Clone(size), live: true})
	s.live++
}

func (s *side) compact() {
	clear(s.idx)
	kept := s.levels[:0]
	for _, l := range s.levels {
		if l.live {
			s.idx[l.price] = int32(len(kept))
			kept = append(kept, l)
		}
	}
	clear(s.levels[len(kept):]) // drop the dead levels' buffers
	s.levels = kept
}

// sorted returns up to depth (0: all) live levels, best first: highest
// price first for bids (desc), lowest first for asks.
func (s *side) sorted(desc bool, depth int) []Level {
	out := make([]Level, 0, s.live)
	for i := range s.levels {
		if l := &s.levels[i]; l.live {
			out = append(out, Level{Price: l.price})
		}
	}
	slices.SortFunc(out, func(a, b Level) int {
		if desc {
			return compareCanonical(b.Price, a.Price)
		}
		return compareCanonical(a.Price, b.Price)
	})
	if depth > 0 && len(out) > depth {
		out = out[:depth:depth]
	}
	for i := range out {
		out[i].Size = string(s.levels[s.idx[out[i].Price]].size)
	}
	return out
}
