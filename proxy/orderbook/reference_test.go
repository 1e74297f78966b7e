package orderbook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// event is one order book event as the tests hold it, in the JSON shape
// of the events endpoint.
type event struct {
	Cursor    string      `json:"cursor"`
	TokenID   string      `json:"tokenId"`
	EventType string      `json:"eventType"`
	Timestamp int64       `json:"timestamp"`
	Side      *string     `json:"side"`
	Price     *string     `json:"price"`
	SizeAfter *string     `json:"sizeAfter"`
	Bids      [][2]string `json:"bids"`
	Asks      [][2]string `json:"asks"`
}

// refLevel is one level of the reference book: its value as an exact
// rational and its size as last written.
type refLevel struct {
	price *big.Rat
	size  string
}

// refBook is the expected answer of Rebuild.
type refBook struct {
	noSnapshot   bool
	snapTs       int64
	applied      int
	bids, asks   []refLevel // best first
	crossedValue bool
}

// reference rebuilds the book at T the naive way, independently of the
// package: every event with timestamp <= T from the first one in stream
// order, a snapshot replacing everything, levels keyed by math/big value.
func reference(t testing.TB, events []event, T int64) refBook {
	t.Helper()
	var bids, asks map[string]refLevel
	var rb refBook
	rb.noSnapshot = true
	rats := map[string]*big.Rat{} // parsed once: streams repeat their strings
	rat := func(s string) *big.Rat {
		r, ok := rats[s]
		if !ok {
			if r, ok = new(big.Rat).SetString(s); !ok {
				t.Fatalf("reference: decimal %q", s)
			}
			rats[s] = r
		}
		return r
	}
	set := func(m map[string]refLevel, price, size string) {
		p := rat(price)
		if rat(size).Sign() == 0 {
			delete(m, p.RatString())
			return
		}
		m[p.RatString()] = refLevel{price: p, size: size}
	}
	for _, e := range events {
		if e.Timestamp > T {
			break
		}
		switch e.EventType {
		case "book":
			bids, asks = map[string]refLevel{}, map[string]refLevel{}
			for _, l := range e.Bids {
				set(bids, l[0], l[1])
			}
			for _, l := range e.Asks {
				set(asks, l[0], l[1])
			}
			rb.noSnapshot, rb.snapTs, rb.applied = false, e.Timestamp, 0
		case "price_change":
			rb.applied++
			if bids == nil {
				continue // nothing to apply it to yet
			}
			m := asks
			if *e.Side == "BUY" {
				m = bids
			}
			set(m, *e.Price, *e.SizeAfter)
		}
	}
	sorted := func(m map[string]refLevel, desc bool) []refLevel {
		var out []refLevel
		for _, l := range m {
			out = append(out, l)
		}
		slices.SortFunc(out, func(a, b refLevel) int {
			if desc {
				return b.price.Cmp(a.price)
			}
			return a.price.Cmp(b.price)
		})
		return out
	}
	rb.bids, rb.asks = sorted(bids, true), sorted(asks, false)
	rb.crossedValue = len(rb.bids) > 0 && len(rb.asks) > 0 && rb.bids[0].price.Cmp(rb.asks[0].price) >= 0
	return rb
}

var canonicalRE = regexp.MustCompile(`^(0|[1-9][0-9]*)(\.[0-9]*[1-9])?$`)

// diffBook describes how got differs from want, "" when it does not.
func diffBook(got *Book, want refBook) string {
	if got.SnapshotTimestamp != want.snapTs {
		return fmt.Sprintf("snapshotTimestamp %d, want %d", got.SnapshotTimestamp, want.snapTs)
	}
	if got.EventsApplied != want.applied {
		return fmt.Sprintf("eventsApplied %d, want %d", got.EventsApplied, want.applied)
	}
	if got.Crossed != want.crossedValue {
		return fmt.Sprintf("crossed %v, want %v", got.Crossed, want.crossedValue)
	}
	for _, s := range []struct {
		name string
		got  []Level
		want []refLevel
	}{{"bids", got.Bids, want.bids}, {"asks", got.Asks, want.asks}} {
		if len(s.got) != len(s.want) {
			return fmt.Sprintf("%s: %d levels %v, want %d", s.name, len(s.got), s.got, len(s.want))
		}
		for i, l := range s.got {
			if !canonicalRE.MatchString(l.Price) {
				return fmt.Sprintf("%s[%d]: price %q not canonical", s.name, i, l.Price)
			}
			p, _ := new(big.Rat).SetString(l.Price)
			if p.Cmp(s.want[i].price) != 0 || l.Size != s.want[i].size {
				return fmt.Sprintf("%s[%d]: %v, want price %s size %q", s.name, i, l, s.want[i].price.FloatString(4), s.want[i].size)
			}
		}
	}
	return ""
}

// memEvents serves one token's events the way the events endpoint does:
// filter by type and time, order, a cursor that resumes strictly after the
// event it names, pages of at most min(limit, pageCap) items. It counts
// the price changes it hands out.
type memEvents struct {
	token   string
	events  []event // ascending by timestamp
	pageCap int     // 0: no cap below the query's limit

	pages   atomic.Int64
	changes atomic.Int64 // price_change items served
}

func (m *memEvents) page(_ context.Context, q Query) ([]byte, error) {
	m.pages.Add(1)
	if q.TokenID != m.token || q.Limit < 1 || q.Limit > maxPageSize ||
		(q.Order != "asc" && q.Order != "desc") || (q.EventType != "book" && q.EventType != "price_change") {
		return nil, fmt.Errorf("memEvents: bad query %+v", q)
	}
	limit := q.Limit
	if m.pageCap > 0 {
		limit = min(limit, m.pageCap)
	}
	match := func(i int) bool {
		e := &m.events[i]
		return e.EventType == q.EventType && e.Timestamp <= q.To
	}
	i, step := 0, 1
	if q.Order == "desc" {
		i, step = len(m.events)-1, -1
	}
	if q.Cursor != "" {
		c, err := strconv.Atoi(q.Cursor[1:])
		if err != nil {
			return nil, err
		}
		i = c + step
	}
	var items []event
	more := false
	for ; i >= 0 && i < len(m.events); i += step {
		if !match(i) {
			continue
		}
		if len(items) == limit {
			more = true
			break
		}
		items = append(items, m.events[i])
	}
	if q.EventType == "price_change" {
		m.changes.Add(int64(len(items)))
	}
	type data struct {
		Items      []event `json:"items"`
		NextCursor *string `json:"nextCursor"`
	}
	d := data{Items: items}
	if d.Items == nil {
		d.Items = []event{}
	}
	if more {
		d.NextCursor = &items[len(items)-1].Cursor
	}
	return json.Marshal(struct {
		Message    string `json:"message"`
		StatusCode string `json:"status_code"`
		Data       data   `json:"data"`
	}{"OK", "1", d})
}

// newMem numbers the events' cursors and returns their server.
func newMem(token string, events []event) *memEvents {
	for i := range events {
		events[i].Cursor = "c" + strconv.Itoa(i)
		events[i].TokenID = token
	}
	return &memEvents{token: token, events: events}
}

// checkRebuild compares Rebuild at T with the reference.
func checkRebuild(t testing.TB, fetch PageFunc, events []event, token string, T int64, opt Options) {
	t.Helper()
	want := reference(t, events, T)
	got, err := Rebuild(context.Background(), fetch, token, T, opt)
	maxEv := opt.MaxEvents
	if maxEv == 0 {
		maxEv = defaultMaxEvents
	}
	switch {
	case want.noSnapshot:
		if !errors.Is(err, ErrNoSnapshot) || got != nil {
			t.Fatalf("T=%d: got %v, %v; want ErrNoSnapshot", T, got, err)
		}
	case want.applied > maxEv:
		if e, ok := errors.AsType[*TooManyEventsError](err); !ok || e.Max != maxEv || got != nil {
			t.Fatalf("T=%d: got %v, %v; want TooManyEventsError{%d}", T, got, err, maxEv)
		}
	case err != nil:
		t.Fatalf("T=%d: %v", T, err)
	default:
		if d := diffBook(got, want); d != "" {
			t.Fatalf("T=%d: %s", T, d)
		}
		if got.At != T || got.TokenID != token {
			t.Fatalf("T=%d: at %d token %q", T, got.At, got.TokenID)
		}
	}
}

// checkAligned rebuilds at T on pages bounded at T and on pages bounded at
// T rounded up to align (settled): the same answer byte for byte, or the
// same error. It reports whether the aligned bound differed from T.
func checkAligned(t testing.TB, fetch PageFunc, token string, T int64, opt Options, align time.Duration) bool {
	t.Helper()
	ctx := context.Background()
	exact, errExact := Rebuild(ctx, fetch, token, T, opt)
	opt.Align, opt.Settled = align, math.MaxInt64
	got, err := Rebuild(ctx, fetch, token, T, opt)
	switch {
	case errExact != nil || err != nil:
		_, manyExact := errors.AsType[*TooManyEventsError](errExact)
		_, many := errors.AsType[*TooManyEventsError](err)
		if (errExact == nil) != (err == nil) || errors.Is(errExact, ErrNoSnapshot) != errors.Is(err, ErrNoSnapshot) || manyExact != many {
			t.Fatalf("T=%d align %v: error %v, on the exact bound %v", T, align, err, errExact)
		}
	default:
		if g, w := got.AppendJSON(nil), exact.AppendJSON(nil); !bytes.Equal(g, w) {
			t.Fatalf("T=%d align %v:\n got %s\nwant %s", T, align, g, w)
		}
	}
	to, _ := pageBound(T, align, math.MaxInt64)
	return to != T
}

// memo is a PageFunc in front of another that keeps every page it read,
// as the edge's cache keeps settled pages, and counts the pages it had to
// read (its misses).
type memo struct {
	next   PageFunc
	pages  map[Query][]byte
	misses int
}

func (m *memo) page(ctx context.Context, q Query) ([]byte, error) {
	if b, ok := m.pages[q]; ok {
		return b, nil
	}
	b, err := m.next(ctx, q)
	if err != nil {
		return nil, err
	}
	if m.pages == nil {
		m.pages = map[Query][]byte{}
	}
	m.misses++
	m.pages[q] = b
	return b, nil
}
