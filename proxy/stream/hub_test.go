package stream

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// writesSink keeps each Write apart.
type writesSink struct {
	mu     sync.Mutex
	writes []string
}

func (s *writesSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, string(p))
	return 0, nil
}
func (s *writesSink) End() {}
func (s *writesSink) Cut() {}

func (s *writesSink) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.writes...)
}

// A read's new events reach each attached subscriber as one write, their
// frames in order, an event the ring holds already left out: per event,
// a poll's events made as many writes (and writing goroutines, and write
// calls) per subscriber, the fanout's cost at 10,000 subscribers.
func TestHubSendsAReadAsOneWrite(t *testing.T) {
	book := &liveBook{n: 1}
	// Polls far apart: the events below are the test's alone.
	cfg := Config{Routes: map[string]RouteConfig{RouteOrderBook: {Poll: time.Hour}}}
	m, err := New(cfg, Options{Pages: book.pages})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	sinks := make([]*writesSink, 2)
	subs := openAttached(t, m, 2, func(i int, _ *Subscriber) Sink {
		sinks[i] = &writesSink{}
		return sinks[i]
	})
	h := subs[0].h
	ev := func(id string) *Event { return newEvent(id, "price_change", []byte(`{"cursor":"`+id+`"}`), time.Now()) }
	h.add([]*Event{ev("x1")}, Pos{ID: "x1"})
	h.add([]*Event{ev("x1"), ev("x2"), ev("x3")}, Pos{ID: "x3"})
	for i, sink := range sinks {
		w := sink.all()
		if len(w) < 2 {
			t.Fatalf("subscriber %d: %d writes %q, want the retry hint and the events", i, len(w), w)
		}
		live := w[len(w)-2:]
		want := []string{string(ev("x1").frame), string(ev("x2").frame) + string(ev("x3").frame)}
		for j := range live {
			if live[j] != want[j] {
				t.Errorf("subscriber %d: live write %d is %q, want %q", i, j, live[j], want[j])
			}
		}
		if ids := strings.Count(strings.Join(live, ""), "id: "); ids != 3 {
			t.Errorf("subscriber %d: %d events in the live writes, want 3", i, ids)
		}
		subs[i].wmu.Lock()
		last := subs[i].lastID
		subs[i].wmu.Unlock()
		if last != "x3" {
			t.Errorf("subscriber %d: last event %q, want x3", i, last)
		}
	}
}

// pausingSink holds the first write of an event in Write, as a sink that
// has put the bytes on the socket but not yet returned, until release.
type pausingSink struct {
	writesSink
	paused  chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *pausingSink) Write(p []byte) (int, error) {
	if strings.Contains(string(p), "id: ") {
		s.once.Do(func() {
			close(s.paused)
			select {
			case <-s.release:
			case <-time.After(200 * time.Millisecond):
			}
		})
	}
	return s.writesSink.Write(p)
}

// An end that comes while an event is being handed to the sink names
// that event as the last one sent: the client may have read it already,
// and an older id would have it sent again on resume.
func TestEndNamesTheEventInTheSink(t *testing.T) {
	book := &liveBook{n: 1}
	cfg := Config{Routes: map[string]RouteConfig{RouteOrderBook: {Poll: time.Hour}}}
	m, err := New(cfg, Options{Pages: book.pages})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	sink := &pausingSink{paused: make(chan struct{}), release: make(chan struct{})}
	s := openAttached(t, m, 1, func(int, *Subscriber) Sink { return sink })[0]
	ev := newEvent("x1", "price_change", []byte(`{"cursor":"x1"}`), time.Now())
	added := make(chan struct{})
	go func() {
		s.h.add([]*Event{ev}, Pos{ID: "x1"})
		close(added)
	}()
	<-sink.paused
	ended := make(chan struct{})
	go func() {
		s.end(ReasonShuttingDown)
		close(ended)
	}()
	// The end waits for the write under way; the sink lets it go after
	// the end has had time to run ahead, when it could.
	select {
	case <-ended:
	case <-time.After(50 * time.Millisecond):
	}
	close(sink.release)
	<-added
	<-ended
	w := sink.all()
	last := w[len(w)-1]
	if !strings.HasPrefix(last, "event: error\n") || !strings.Contains(last, `"lastEventId":"x1"`) {
		t.Fatalf("last write %q, want the error event naming x1 (writes %q)", last, w)
	}
}
