package stream

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Pages reads one page of a route through the edge's page cache, as a
// client's request for the same page would be read: the same canonical
// request, the same cache entry, the same flight (a poll and a client
// asking for the same page meet in one legacy call). rawQuery is the
// route's query, made canonical by the reader; pathParam the trader's
// address, or "". fetched reports whether this read started the legacy
// call that answered it. An error is the edge's error for the page (its
// row of the error table). A poll's read carries Since(ctx): a page the
// cache stored before it must not answer.
type Pages func(ctx context.Context, route, pathParam, rawQuery string) (body []byte, fetched bool, err error)

// sinceKey carries, in a read's context, the moment before which a
// cached page does not answer the read (Since).
type sinceKey struct{}

func withSince(ctx context.Context, t time.Time) context.Context {
	if t.IsZero() {
		return ctx
	}
	return context.WithValue(ctx, sinceKey{}, t)
}

// Since is, for a read of Pages, the moment before which a cached page
// does not answer it: a poll's read must see what the legacy host says
// since the last poll, not a page the cache kept from it (the cache's
// GetSince). Zero: any page the cache would serve.
func Since(ctx context.Context) time.Time {
	t, _ := ctx.Value(sinceKey{}).(time.Time)
	return t
}

// Pos is a position in a stream: after the event whose id is ID, or,
// with no ID, from the time From (Unix ms for the order book, Unix s for
// the trader routes) when HasFrom.
type Pos struct {
	ID      string
	From    int64
	HasFrom bool
}

// source reads a stream's events from its route's pages.
type source interface {
	// head is the position "now": after the newest event there is.
	head(ctx context.Context) (Pos, error)
	// read returns the events after pos in stream order (one batch), the
	// position after them, and whether more follow at once.
	read(ctx context.Context, pos Pos) (evs []*Event, next Pos, more bool, err error)
}

// counter counts a source's reads: one page read, and whether it started
// a legacy call.
type counter func(fetched bool)

// bookSource is the order book events stream: pages of orderbook_events
// with order=asc from a cursor (docs/CONTRACT.md#reconstruction reads the
// same pages), the events as the page holds them, each event's id its
// cursor.
type bookSource struct {
	pages   Pages
	filters string // the canonical filters: marketId, conditionId, tokenId, eventType
	now     func() time.Time
	count   counter
}

// bookPage is the page size of the order book's reads: the route's
// default, so that a client's first request of the same page is the same
// cache entry.
const bookPage = 1000

func (s *bookSource) page(ctx context.Context, q string) (page, error) {
	body, fetched, err := s.pages(ctx, RouteOrderBook, "", s.filters+q)
	if s.count != nil {
		s.count(fetched)
	}
	if err != nil {
		return page{}, err
	}
	return parsePage(body)
}

func (s *bookSource) head(ctx context.Context) (Pos, error) {
	p, err := s.page(ctx, "&order=desc&limit=1")
	if err != nil {
		return Pos{}, err
	}
	if len(p.items) == 0 {
		return Pos{From: s.now().UnixMilli(), HasFrom: true}, nil
	}
	var it bookItem
	if err := json.Unmarshal(p.items[0], &it); err != nil || it.Cursor == "" {
		return Pos{}, errBadPage
	}
	return Pos{ID: it.Cursor}, nil
}

type bookItem struct {
	Cursor           string `json:"cursor"`
	EventType        string `json:"eventType"`
	IndexedTimestamp int64  `json:"indexedTimestamp"`
}

func (s *bookSource) read(ctx context.Context, pos Pos) ([]*Event, Pos, bool, error) {
	q := "&order=asc&limit=" + strconv.Itoa(bookPage)
	switch {
	case pos.ID != "":
		q += "&cursor=" + url.QueryEscape(pos.ID)
	case pos.HasFrom:
		q = "&from=" + strconv.FormatInt(pos.From, 10) + q
	}
	p, err := s.page(ctx, q)
	if err != nil {
		return nil, pos, false, err
	}
	evs := make([]*Event, 0, len(p.items))
	for _, raw := range p.items {
		var it bookItem
		if err := json.Unmarshal(raw, &it); err != nil || it.Cursor == "" || !validID(it.Cursor) {
			return nil, pos, false, errBadPage
		}
		evs = append(evs, newEvent(it.Cursor, eventName(it.EventType), raw, time.UnixMilli(it.IndexedTimestamp)))
	}
	if len(evs) > 0 {
		pos = Pos{ID: evs[len(evs)-1].ID}
	}
	return evs, pos, p.next != "" && len(evs) > 0, nil
}

// validID is the cursor rule (docs/CONTRACT.md#query-parameters): 1 to
// 1024 printable ASCII characters. Those are also what an SSE id field
// may carry (no line break, no NUL).
func validID(id string) bool {
	if id == "" || len(id) > 1024 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// eventName is the SSE event name of an order book event: its eventType
// when it is one the contract names, "message" otherwise (the name a
// client's default handler receives).
func eventName(t string) string {
	if t == "book" || t == "price_change" {
		return t
	}
	return "message"
}

// listSource is the stream of a trader's newest-first list (activity,
// deposits-withdrawals). Its items carry no cursor, so an event's id is
// made from what the contract gives (docs/CONTRACT.md#streams):
// `<blockTimestamp>-<txHash>-<n>`, n numbering from 0 the items of that
// second and transaction in the order of their bytes. Stream order is
// the order of those ids' parts: time, then hash, then n. A position is
// therefore comparable without the legacy host: "after id K" is every
// item whose key is above K, read from the pages of fromTimestamp =
// K's second.
type listSource struct {
	pages    Pages
	route    string
	addr     string
	filters  string // canonical filters, each "&name=value"
	typ      string // the SSE event name
	now      func() time.Time
	count    counter
	maxPages int // pages one read may walk before it narrows its window
}

// listPage is the page size of the trader routes' reads: their largest.
const listPage = 100

// itemKey is a list item's place in its stream.
type itemKey struct {
	ts int64
	tx string
	n  int
}

func (k itemKey) id() string {
	return strconv.FormatInt(k.ts, 10) + "-" + k.tx + "-" + strconv.Itoa(k.n)
}

func compareKeys(a, b itemKey) int {
	return cmp.Or(cmp.Compare(a.ts, b.ts), strings.Compare(a.tx, b.tx), cmp.Compare(a.n, b.n))
}

// parseKey reads an id of listSource's form.
func parseKey(id string) (itemKey, bool) {
	ts, rest, ok := strings.Cut(id, "-")
	if !ok {
		return itemKey{}, false
	}
	tx, n, ok := strings.Cut(rest, "-")
	if !ok || len(tx) != 66 || !strings.HasPrefix(tx, "0x") {
		return itemKey{}, false
	}
	for i := 2; i < len(tx); i++ {
		if c := tx[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return itemKey{}, false
		}
	}
	t, err1 := strconv.ParseInt(ts, 10, 64)
	k, err2 := strconv.Atoi(n)
	if err1 != nil || err2 != nil || t < 0 || k < 0 || strconv.FormatInt(t, 10) != ts || strconv.Itoa(k) != n {
		return itemKey{}, false
	}
	return itemKey{ts: t, tx: tx, n: k}, true
}

type listItem struct {
	BlockTimestamp int64  `json:"blockTimestamp"`
	TxHash         string `json:"txHash"`
}

type keyed struct {
	key itemKey
	raw json.RawMessage
}

// walk reads the pages of [lo, hi] (hi < 0: no upper bound), newest
// first, at most maxPages of them; done reports whether it reached the
// last.
func (s *listSource) walk(ctx context.Context, lo, hi int64) (items []keyed, done bool, err error) {
	q := s.filters + "&fromTimestamp=" + strconv.FormatInt(lo, 10)
	if hi >= 0 {
		q += "&toTimestamp=" + strconv.FormatInt(hi, 10)
	}
	q += "&limit=" + strconv.Itoa(listPage)
	cursor := ""
	for range s.maxPages {
		qc := q
		if cursor != "" {
			// The trader routes take cursor before limit: the order of
			// the canonical query, made by the reader either way.
			qc += "&cursor=" + url.QueryEscape(cursor)
		}
		body, fetched, err := s.pages(ctx, s.route, s.addr, strings.TrimPrefix(qc, "&"))
		if s.count != nil {
			s.count(fetched)
		}
		if err != nil {
			return nil, false, err
		}
		p, err := parsePage(body)
		if err != nil {
			return nil, false, err
		}
		for _, raw := range p.items {
			var it listItem
			if err := json.Unmarshal(raw, &it); err != nil || len(it.TxHash) != 66 {
				return nil, false, errBadPage
			}
			items = append(items, keyed{key: itemKey{ts: it.BlockTimestamp, tx: strings.ToLower(it.TxHash)}, raw: raw})
		}
		if p.next == "" || len(p.items) == 0 {
			return items, true, nil
		}
		cursor = p.next
	}
	return items, false, nil
}

var errCrowdedSecond = errors.New("stream: more items in one second than a read may hold")

func (s *listSource) head(ctx context.Context) (Pos, error) {
	// The newest item's second, then that whole second: the head is its
	// last key.
	body, fetched, err := s.pages(ctx, s.route, s.addr, strings.TrimPrefix(s.filters+"&limit=1", "&"))
	if s.count != nil {
		s.count(fetched)
	}
	if err != nil {
		return Pos{}, err
	}
	p, err := parsePage(body)
	if err != nil {
		return Pos{}, err
	}
	if len(p.items) == 0 {
		return Pos{From: s.now().Unix(), HasFrom: true}, nil
	}
	var it listItem
	if err := json.Unmarshal(p.items[0], &it); err != nil {
		return Pos{}, errBadPage
	}
	items, done, err := s.walk(ctx, it.BlockTimestamp, it.BlockTimestamp)
	if err != nil {
		return Pos{}, err
	}
	if !done {
		return Pos{}, errCrowdedSecond
	}
	number(items)
	last := items[0].key
	for _, k := range items[1:] {
		if compareKeys(k.key, last) > 0 {
			last = k.key
		}
	}
	return Pos{ID: last.id()}, nil
}

// number gives each item its n: within one second and transaction, the
// order of their bytes. Items equal in every byte are told apart by
// their count alone, which is all a client could tell of them too.
func number(items []keyed) {
	slices.SortFunc(items, func(a, b keyed) int {
		return cmp.Or(cmp.Compare(a.key.ts, b.key.ts), strings.Compare(a.key.tx, b.key.tx), bytes.Compare(a.raw, b.raw))
	})
	for i := range items {
		if i > 0 && items[i].key.ts == items[i-1].key.ts && items[i].key.tx == items[i-1].key.tx {
			items[i].key.n = items[i-1].key.n + 1
		} else {
			items[i].key.n = 0
		}
	}
}

func (s *listSource) read(ctx context.Context, pos Pos) ([]*Event, Pos, bool, error) {
	var after itemKey
	haveAfter := false
	lo := int64(0)
	if pos.ID != "" {
		k, ok := parseKey(pos.ID)
		if !ok {
			return nil, pos, false, errBadPage
		}
		after, haveAfter, lo = k, true, k.ts
	}
	if pos.HasFrom {
		lo = max(lo, pos.From)
	}
	// Newest first: a read that cannot reach the last page narrows its
	// window to the seconds it has not seen whole, until it can; the
	// newer items come with the next read.
	hi := int64(-1)
	var items []keyed
	for {
		got, done, err := s.walk(ctx, lo, hi)
		if err != nil {
			return nil, pos, false, err
		}
		if done {
			items = got
			break
		}
		oldest := got[len(got)-1].key.ts
		if oldest <= lo {
			return nil, pos, false, errCrowdedSecond
		}
		hi = oldest - 1 // the oldest second may be cut: read it again below
	}
	number(items)
	evs := make([]*Event, 0, len(items))
	for _, it := range items {
		if haveAfter && compareKeys(it.key, after) <= 0 {
			continue
		}
		evs = append(evs, newEvent(it.key.id(), s.typ, it.raw, time.Unix(it.key.ts, 0)))
	}
	switch {
	case len(evs) > 0:
		pos = Pos{ID: evs[len(evs)-1].ID}
	case hi >= 0:
		// Nothing new up to hi: the next read starts past it, still
		// after the same id.
		pos.From, pos.HasFrom = hi+1, true
	}
	return evs, pos, hi >= 0, nil
}
