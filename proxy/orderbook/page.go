package orderbook

import (
	"errors"
	"fmt"
)

const (
	evBook   = "book"
	evChange = "price_change"
)

// reader decodes events pages straight into the book, in place (scan.go):
// nothing is copied into events, so a page costs no allocation per event.
type reader struct {
	tokenID string
	at      int64 // the requested time: later events are read, never applied
	to      int64 // the pages' upper bound, at or later: later events break the page

	bids, asks side
	desc       bool  // the pages read are in descending order (the snapshot's)
	haveTs     bool  // lastTs holds an event's timestamp
	lastTs     int64 // timestamp of the last event read
	haveSnap   bool  // the book holds the snapshot: the latest book event <= at
	snapTs     int64 // its timestamp
	snapCursor string
	nextCursor string

	price, size, text []byte // scratch for one event's strings
	key               []byte // scratch for an escaped member name
}

func newReader(tokenID string, at, to int64) *reader {
	return &reader{tokenID: tokenID, at: at, to: to, bids: newSide(), asks: newSide()}
}

type pageInfo struct {
	items int
	past  int  // items after at, read past (always the last ones of a page of changes)
	more  bool // nextCursor was a string
}

// page decodes one variant A page whose items must all be of kind want,
// at most limit of them, and applies them to the book. Of a member
// repeated in an object, the last one counts.
func (r *reader) page(body []byte, limit int, want string) (pg pageInfo, err error) {
	s := scan{b: body}
	sawData := false
	err = r.object(&s, func(name []byte) error {
		switch string(name) {
		case "status_code":
			v, err := s.value()
			if err != nil {
				return err
			}
			if c, err := r.str(v, s.esc, false); err != nil || string(c) != "1" {
				return fmt.Errorf("status_code %s is not a success", v)
			}
		case "data":
			if sawData {
				return errors.New("data twice")
			}
			sawData = true
			var err error
			pg, err = r.data(&s, limit, want)
			return err
		default:
			_, err := s.value()
			return err
		}
		return nil
	})
	if err != nil {
		return pg, err
	}
	if err := s.end(); err != nil {
		return pg, err
	}
	if !sawData {
		return pg, errors.New("no data member")
	}
	return pg, nil
}

// data reads the data member: null (nothing found) or items and nextCursor.
func (r *reader) data(s *scan, limit int, want string) (pg pageInfo, err error) {
	if s.peek() == 'n' {
		v, err := s.value()
		if err == nil && string(v) != "null" {
			err = fmt.Errorf("data is %s", v)
		}
		return pg, err
	}
	sawItems := false
	err = r.object(s, func(name []byte) error {
		switch string(name) {
		case "items":
			if sawItems {
				return errors.New("items twice") // its events are applied already
			}
			sawItems = true
			if err := s.open('['); err != nil {
				return err
			}
			for first := true; ; first = false {
				more, err := s.more(']', first)
				if err != nil || !more {
					return err
				}
				if pg.items++; pg.items > limit {
					return fmt.Errorf("more than the %d items asked for", limit)
				}
				past, err := r.event(s, want)
				if err != nil {
					return fmt.Errorf("item %d: %w", pg.items-1, err)
				}
				if past {
					pg.past++
				}
			}
		case "nextCursor":
			v, err := s.value()
			if err != nil {
				return err
			}
			c, err := r.str(v, s.esc, true)
			if err != nil {
				return fmt.Errorf("nextCursor: %w", err)
			}
			pg.more = c != nil
			if pg.more {
				r.nextCursor = string(c)
			}
			return nil
		default:
			_, err := s.value()
			return err
		}
	})
	if err != nil {
		return pg, err
	}
	if !sawItems {
		return pg, errors.New("data has no items")
	}
	return pg, nil
}

// object reads an object member by member: it reads each member's name
// (unquoted, valid until the next name) and calls member, which reads the
// value. It stops at the closing brace or the first error.
func (r *reader) object(s *scan, member func(name []byte) error) error {
	if err := s.open('{'); err != nil {
		return err
	}
	for first := true; ; first = false {
		more, err := s.more('}', first)
		if err != nil || !more {
			return err
		}
		name, err := r.name(s)
		if err != nil {
			return err
		}
		if err := member(name); err != nil {
			return err
		}
	}
}
