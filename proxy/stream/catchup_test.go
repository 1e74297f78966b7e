package stream

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// liveBook is an order book whose events keep coming: one arrives while
// each page is read, so every read from the newest event finds one more.
// That is the legacy host when its pages take longer than the gap
// between two events.
type liveBook struct {
	mu     sync.Mutex
	n      int // events so far: cursors c00000001 to cursor(n)
	reads  int
	sinces []time.Time // Since of each read, in order
}

func cursor(i int) string { return fmt.Sprintf("c%08d", i) }

func (b *liveBook) pages(ctx context.Context, route, _, rawQuery string) ([]byte, bool, error) {
	// Each page takes a moment, as a legacy call does.
	if !sleep(ctx, 20*time.Millisecond) {
		return nil, false, ctx.Err()
	}
	b.mu.Lock()
	b.n++
	b.reads++
	b.sinces = append(b.sinces, Since(ctx))
	n := b.n
	b.mu.Unlock()
	q, err := url.ParseQuery(rawQuery)
	if err != nil || route != RouteOrderBook {
		return nil, false, fmt.Errorf("unexpected read %s %s", route, rawQuery)
	}
	from := 1
	if c := q.Get("cursor"); c != "" {
		i, err := strconv.Atoi(strings.TrimPrefix(c, "c"))
		if err != nil {
			return nil, false, err
		}
		from = i + 1
	}
	var items []string
	if q.Get("order") == "desc" {
		items = append(items, item(n))
	} else {
		for i := from; i <= n; i++ {
			items = append(items, item(i))
		}
	}
	return []byte(`{"message":"ok","status_code":200,"data":{"items":[` + strings.Join(items, ",") + `],"nextCursor":null}}`), true, nil
}

func item(i int) string {
	return `{"cursor":"` + cursor(i) + `","eventType":"price_change","indexedTimestamp":` + strconv.FormatInt(time.Now().UnixMilli(), 10) + `}`
}

// recordSink is a Sink that keeps what it is given.
type recordSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *recordSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	return 0, nil
}
func (s *recordSink) End() {}
func (s *recordSink) Cut() {}

// frames returns the ids of the events written so far, and the data of
// an error event if one was.
func (s *recordSink) frames() (ids []string, errData string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range strings.Split(s.buf.String(), "\n\n") {
		for _, line := range strings.Split(f, "\n") {
			switch {
			case strings.HasPrefix(line, "id: "):
				ids = append(ids, strings.TrimPrefix(line, "id: "))
			case strings.HasPrefix(line, "data: ") && strings.Contains(f, "event: error"):
				errData = strings.TrimPrefix(line, "data: ")
			}
		}
	}
	return ids, errData
}

// A stream that starts behind, from a host whose every page holds one
// more event than the last, reaches the live events and is handed to its
// hub: once a read reaches the end of the pages it waits for the hub's
// next poll instead of reading on. Reading on would chase the new events
// a page at a time and end the stream too_far_behind though it was never
// more than one event behind.
func TestCatchUpMeetsTheHub(t *testing.T) {
	book := &liveBook{n: 5} // the stream below starts well before the hub's first event
	cfg := Config{CatchUpPages: 3, Routes: map[string]RouteConfig{RouteOrderBook: {Poll: 400 * time.Millisecond}}}
	m, err := New(cfg, Options{Pages: book.pages})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// A first subscriber, from now, starts the hub; the hub's first poll
	// is done before the second opens, and its next comes 400ms later.
	req := Request{Route: RouteOrderBook, Filters: "&tokenId=1", KeyID: "k"}
	first, err := m.Open(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	first.Start(&recordSink{})
	time.Sleep(100 * time.Millisecond)
	req.Start = Pos{ID: cursor(1)}
	s, err := m.Open(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	sink := &recordSink{}
	s.Start(sink)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ids, errData := sink.frames()
		if errData != "" {
			t.Fatalf("the stream ended after %d events: %s", len(ids), errData)
		}
		s.mu.Lock()
		attached := s.attached
		s.mu.Unlock()
		if attached && len(ids) >= 12 {
			for i, id := range ids {
				if id != cursor(i+2) {
					t.Fatalf("event %d is %s, want %s (all: %v)", i, id, cursor(i+2), ids)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not handed to the hub after 10s: attached %v, %d events", attached, len(ids))
		}
		time.Sleep(20 * time.Millisecond)
	}
	book.mu.Lock()
	reads := book.reads
	book.mu.Unlock()
	// The hub's polls, the head, and a few of the catch-up's: not one a
	// moment.
	if reads > 60 {
		t.Errorf("%d page reads in the test's second or so", reads)
	}
}

// A hub's poll tells the page cache what it saw last: each read after
// the first carries, as Since, the moment the previous read returned, so
// that the page cached then (still fresh when the interval is the fresh
// TTL) does not answer the next poll.
func TestPollsCarrySince(t *testing.T) {
	book := &liveBook{}
	cfg := Config{Routes: map[string]RouteConfig{RouteOrderBook: {Poll: 50 * time.Millisecond}}}
	m, err := New(cfg, Options{Pages: book.pages})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := m.Open(context.Background(), Request{Route: RouteOrderBook, Filters: "&tokenId=1", KeyID: "k"})
	if err != nil {
		t.Fatal(err)
	}
	s.Start(&recordSink{})
	time.Sleep(400 * time.Millisecond)
	book.mu.Lock()
	sinces := append([]time.Time(nil), book.sinces...)
	book.mu.Unlock()
	// The head's read and the first poll's carry none.
	if len(sinces) < 5 || !sinces[0].IsZero() || !sinces[1].IsZero() {
		t.Fatalf("sinces %v", sinces)
	}
	for i := 2; i < len(sinces); i++ {
		if !sinces[i].After(sinces[i-1]) {
			t.Fatalf("read %d since %v, not after read %d's %v", i, sinces[i], i-1, sinces[i-1])
		}
	}
}
