package orderbook

import (
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
)

// event reads one event of kind want and applies it, unless it comes
// after r.at: such an event (past) is read and checked, never applied.
// While the reader looks for the snapshot (the first book event <= at of
// the descending snapshot pages), each book event is a candidate whose
// levels go straight into the emptied book; once the snapshot is found,
// later book events are only checked. A price change is applied once all
// its members are read, since they may come in any order. Members are
// dispatched by name here, with direct calls, not through object: this
// loop runs for every member of every event. Members the rebuild does not
// use are skipped.
func (r *reader) event(s *scan, want string) (past bool, err error) {
	if err := s.open('{'); err != nil {
		return false, err
	}
	book := want == evBook
	take := book && !r.haveSnap
	if take {
		r.bids.reset()
		r.asks.reset()
		r.snapCursor = ""
	}
	var (
		h  head
		pc priceChange
	)
	for first := true; ; first = false {
		more, err := s.more('}', first)
		if err != nil {
			return false, err
		}
		if !more {
			break
		}
		name, err := r.name(s)
		if err != nil {
			return false, err
		}
		val, err := s.value()
		if err != nil {
			return false, err
		}
		esc := s.esc
		switch string(name) {
		case "tokenId", "eventType", "timestamp":
			err = r.headMember(&h, want, name, val, esc)
		case "cursor", "bids", "asks":
			if take {
				err = r.snapshotMember(name, val, esc)
			}
		case "side", "price", "sizeAfter":
			if !book {
				err = r.changeMember(&pc, name, val, esc)
			}
		}
		if err != nil {
			return false, err
		}
	}
	if err := r.inOrder(h); err != nil {
		return false, err
	}
	past = h.ts > r.at
	if book {
		switch {
		case !take:
		case r.snapCursor == "":
			return false, errors.New("snapshot without a cursor")
		case !past:
			r.haveSnap, r.snapTs = true, h.ts
		}
		return past, nil
	}
	if pc.side == nil || !pc.havePrice || !pc.haveSize {
		return false, errors.New("price change without side, price or sizeAfter")
	}
	if past {
		return true, nil
	}
	return false, apply(pc.side, r.price, r.size)
}

// head is what every event must carry: its token, its kind, its time.
type head struct {
	sawToken, sawType, sawTs bool
	ts                       int64
}

// priceChange is what a price change's members said so far; its price and
// size are in reader.price and reader.size.
type priceChange struct {
	side                *side
	havePrice, haveSize bool
}

// headMember reads a member every event carries into h, checking it
// against the token and kind asked for.
func (r *reader) headMember(h *head, want string, name, val []byte, esc bool) (err error) {
	switch string(name) {
	case "tokenId":
		v, err := r.str(val, esc, false)
		if err != nil {
			return fmt.Errorf("tokenId: %w", err)
		}
		if string(v) != r.tokenID {
			return fmt.Errorf("event of token %q, not of the token asked for", v)
		}
		h.sawToken = true
	case "eventType":
		v, err := r.str(val, esc, false)
		if err != nil {
			return fmt.Errorf("eventType: %w", err)
		}
		if string(v) != want {
			return fmt.Errorf("eventType %q where %s was asked for", v, want)
		}
		h.sawType = true
	case "timestamp":
		if h.ts, err = intValue(val); err != nil {
			return fmt.Errorf("timestamp: %w", err)
		}
		h.sawTs = true
	}
	return nil
}

// snapshotMember reads a member of a snapshot: its cursor or a side's
// levels.
func (r *reader) snapshotMember(name, val []byte, esc bool) error {
	switch string(name) {
	case "cursor":
		v, err := r.str(val, esc, false)
		if err != nil {
			return fmt.Errorf("cursor: %w", err)
		}
		r.snapCursor = string(v)
	case "bids":
		if err := r.levels(&r.bids, val); err != nil {
			return fmt.Errorf("bids: %w", err)
		}
	case "asks":
		if err := r.levels(&r.asks, val); err != nil {
			return fmt.Errorf("asks: %w", err)
		}
	}
	return nil
}

// changeMember reads a member of a price change into pc: its side, price
// or size after.
func (r *reader) changeMember(pc *priceChange, name, val []byte, esc bool) error {
	switch string(name) {
	case "side":
		v, err := r.str(val, esc, false)
		if err != nil {
			return fmt.Errorf("side of a price change: %w", err)
		}
		switch string(v) {
		case "BUY":
			pc.side = &r.bids
		case "SELL":
			pc.side = &r.asks
		default:
			return fmt.Errorf("side %q is neither BUY nor SELL", v)
		}
	case "price":
		v, err := r.str(val, esc, false)
		if err != nil {
			return fmt.Errorf("price of a price change: %w", err)
		}
		r.price, pc.havePrice = append(r.price[:0], v...), true
	case "sizeAfter":
		v, err := r.str(val, esc, false)
		if err != nil {
			return fmt.Errorf("sizeAfter of a price change: %w", err)
		}
		r.size, pc.haveSize = append(r.size[:0], v...), true
	}
	return nil
}

// inOrder checks that the event carried its head, comes in the page's
// order after the previous event (not earlier in time on an ascending
// page, not later on a descending one) and not after the pages' upper
// bound; it then becomes the previous event.
func (r *reader) inOrder(h head) error {
	switch {
	case !h.sawToken:
		return errors.New("no tokenId")
	case !h.sawType:
		return errors.New("no eventType")
	case !h.sawTs:
		return errors.New("no timestamp")
	case h.ts > r.to:
		return fmt.Errorf("timestamp %d after the upper bound %d asked for", h.ts, r.to)
	case r.haveTs && !r.desc && h.ts < r.lastTs:
		return fmt.Errorf("timestamp %d before the previous event's %d", h.ts, r.lastTs)
	case r.haveTs && r.desc && h.ts > r.lastTs:
		return fmt.Errorf("timestamp %d after the previous event's %d on a descending page", h.ts, r.lastTs)
	}
	r.lastTs, r.haveTs = h.ts, true
	return nil
}

// apply sets one level of sd from the decimal strings price and size.
func apply(sd *side, price, size []byte) error {
	p, err := canonical(price)
	if err != nil {
		return fmt.Errorf("price %q: %w", price, err)
	}
	z, err := canonical(size)
	if err != nil {
		return fmt.Errorf("size %q: %w", size, err)
	}
	sd.set(p, size, isZero(z))
	return nil
}

// levels reads a snapshot side, an array of [price, size] pairs, or null
// (no levels). A price listed twice keeps its last size, and a size of 0
// lists no level, as the same pair would do as a price change.
func (r *reader) levels(sd *side, v []byte) error {
	if string(v) == "null" {
		return nil
	}
	s := scan{b: v}
	if err := s.open('['); err != nil {
		return err
	}
	for first := true; ; first = false {
		more, err := s.more(']', first)
		if err != nil {
			return err
		}
		if !more {
			return s.end()
		}
		if err := s.open('['); err != nil {
			return err
		}
		p, err1 := s.value()
		pEsc := s.esc
		more, err2 := s.more(']', false)
		z, err3 := s.value()
		zEsc := s.esc
		last, err4 := s.more(']', false)
		if err := errors.Join(err1, err2, err3, err4); err != nil || !more || last {
			return errors.New("a level is not a [price, size] pair")
		}
		ps, err := r.str(p, pEsc, false)
		if err != nil {
			return err
		}
		r.price = append(r.price[:0], ps...)
		zs, err := r.str(z, zEsc, false)
		if err != nil {
			return err
		}
		if err := apply(sd, r.price, zs); err != nil {
			return err
		}
	}
}

// name reads a member name and returns it unquoted, valid until the next
// name.
func (r *reader) name(s *scan) ([]byte, error) {
	q, err := s.name()
	if err != nil {
		return nil, err
	}
	if !s.esc {
		return q[1 : len(q)-1], nil
	}
	r.key, err = jsontext.AppendUnquote(r.key[:0], q)
	return r.key, err
}

// str returns the contents of the JSON string v, or nil for null when
// nullable; esc tells whether v has escapes (scan.esc). Only a string with
// escapes is copied (into r.text), so the result is valid until the next
// str.
func (r *reader) str(v []byte, esc, nullable bool) ([]byte, error) {
	switch {
	case len(v) > 0 && v[0] == '"':
		if !esc {
			return v[1 : len(v)-1 : len(v)-1], nil
		}
		var err error
		r.text, err = jsontext.AppendUnquote(r.text[:0], v)
		if len(r.text) == 0 {
			return r.text[:0:0], err // not nil: nil stands for null
		}
		return r.text, err
	case nullable && string(v) == "null":
		return nil, nil
	}
	return nil, fmt.Errorf("%.20s where a string was expected", v)
}

// intValue reads a JSON number that is an integer within int64.
func intValue(v []byte) (int64, error) {
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		v = v[1:]
	}
	if len(v) == 0 || len(v) > 1 && v[0] == '0' {
		return 0, fmt.Errorf("%q is not an integer", v)
	}
	var n uint64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not an integer", v)
		}
		if n > (1<<63)/10 {
			return 0, errors.New("integer out of range")
		}
		n = n*10 + uint64(c-'0')
	}
	switch {
	case neg && n <= 1<<63:
		return -int64(n), nil
	case !neg && n < 1<<63:
		return int64(n), nil
	}
	return 0, errors.New("integer out of range")
}
