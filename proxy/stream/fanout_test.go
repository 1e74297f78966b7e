package stream

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// stillBook is an order book with one event that never gets another:
// the hub's polls add nothing, so the events a test adds are all there is.
func stillBook(ctx context.Context, route, _, rawQuery string) ([]byte, bool, error) {
	items := ""
	if strings.Contains(rawQuery, "order=desc") {
		items = item(1)
	}
	return []byte(`{"message":"ok","status_code":200,"data":{"items":[` + items + `],"nextCursor":null}}`), true, nil
}

// slowSink takes every write, but tells of a queue past any budget once
// an event comes: its stream ends as slow at its first live write.
type slowSink struct {
	writesSink
	ended bool
}

func (s *slowSink) Write(p []byte) (int, error) {
	n, _ := s.writesSink.Write(p)
	if strings.Contains(string(p), "id: ") {
		return 1 << 30, nil
	}
	return n, nil
}

func (s *slowSink) End() { s.mu.Lock(); s.ended = true; s.mu.Unlock() }

// openAttached opens n streams of one order book, each started on the
// sink mk gives, and waits until the hub feeds all of them.
func openAttached(t testing.TB, m *Manager, n int, mk func(i int, s *Subscriber) Sink) []*Subscriber {
	t.Helper()
	subs := make([]*Subscriber, n)
	for i := range subs {
		s, err := m.Open(context.Background(), Request{Route: RouteOrderBook, Filters: "&tokenId=1", KeyID: "k"})
		if err != nil {
			t.Fatal(err)
		}
		s.Start(mk(i, s))
		subs[i] = s
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range subs {
		for {
			s.mu.Lock()
			attached := s.attached
			s.mu.Unlock()
			if attached {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("not attached to the hub after 30s")
			}
			time.Sleep(time.Millisecond)
		}
	}
	return subs
}

// frameIDs are the ids of the events in writes, in order.
func frameIDs(writes []string) []string {
	var ids []string
	for _, w := range writes {
		for _, line := range strings.Split(w, "\n") {
			if id, ok := strings.CutPrefix(line, "id: "); ok {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// A hub with many subscribers hands each read to them in shards on
// several goroutines: every subscriber still gets every event once and
// in order, a slow consumer is ended (its end frame naming the event it
// was handed), detached and released, and the delivered events and their
// lags are counted once each.
func TestHubHandsOffInShards(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	const n = 4 * fanShard
	cfg := Config{MaxPerKey: 2 * n, Routes: map[string]RouteConfig{RouteOrderBook: {Poll: time.Hour}}}
	m, err := New(cfg, Options{Pages: stillBook})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	sinks := make([]Sink, n)
	slow := func(i int) bool { return i%7 == 3 }
	subs := openAttached(t, m, n, func(i int, _ *Subscriber) Sink {
		if slow(i) {
			sinks[i] = &slowSink{}
		} else {
			sinks[i] = &writesSink{}
		}
		return sinks[i]
	})
	es := m.metrics.perEvent[RouteOrderBook]
	events0 := counterValue(t, es.events)

	h := subs[0].h
	var want []string
	batches := 0
	for r := range 30 {
		var evs []*Event
		for j := range 1 + r%3 {
			id := fmt.Sprintf("x%03d-%d", r, j)
			evs = append(evs, newEvent(id, "price_change", []byte(`{"cursor":"`+id+`"}`), time.Now()))
			want = append(want, id)
		}
		h.add(evs, Pos{ID: evs[len(evs)-1].ID})
		batches++
	}
	h.mu.Lock()
	sharded := cap(h.fan) >= n
	attached := len(h.subs)
	h.mu.Unlock()
	if !sharded {
		t.Fatal("the hand-off did not take the sharded path")
	}

	firstBatch := want[:1]
	nSlow := 0
	for i, s := range subs {
		if slow(i) {
			nSlow++
			sink := sinks[i].(*slowSink)
			select {
			case <-s.Done():
			default:
				t.Fatalf("slow subscriber %d did not end", i)
			}
			s.mu.Lock()
			reason := s.reason
			s.mu.Unlock()
			if reason != ReasonSlowConsumer {
				t.Errorf("slow subscriber %d ended as %q, want %q", i, reason, ReasonSlowConsumer)
			}
			h.mu.Lock()
			_, in := h.subs[s]
			h.mu.Unlock()
			if in {
				t.Errorf("slow subscriber %d still attached", i)
			}
			w := sink.all()
			last := w[len(w)-1]
			if ids := frameIDs(w); strings.Join(ids, ",") != strings.Join(firstBatch, ",") {
				t.Errorf("slow subscriber %d got %q, want %q", i, ids, firstBatch)
			}
			sink.mu.Lock()
			ended := sink.ended
			sink.mu.Unlock()
			if !ended || !strings.Contains(last, `"lastEventId":"`+firstBatch[0]+`"`) {
				t.Errorf("slow subscriber %d: ended %v, last write %q, want the end naming %s", i, ended, last, firstBatch[0])
			}
			continue
		}
		ids := frameIDs(sinks[i].(*writesSink).all())
		if got, w := strings.Join(ids, ","), strings.Join(want, ","); got != w {
			t.Fatalf("subscriber %d got events %q, want %q once each, in order", i, ids, want)
		}
	}
	if attached != n-nSlow {
		t.Errorf("%d subscribers attached, want %d", attached, n-nSlow)
	}
	m.mu.Lock()
	open := len(m.subs)
	m.mu.Unlock()
	if open != n-nSlow {
		t.Errorf("%d streams open, want %d (the slow ones released)", open, n-nSlow)
	}
	delivered := (n-nSlow)*len(want) + nSlow*len(firstBatch)
	if got := counterValue(t, es.events) - events0; got != float64(delivered) {
		t.Errorf("events_total grew by %v, want %d", got, delivered)
	}
	count := lagCount(t, m)
	if count != uint64(delivered) {
		t.Errorf("delivery_lag_seconds counts %d, want %d", count, delivered)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// lagCount is the order book's delivery lag count, as collected.
func lagCount(t *testing.T, m *Manager) uint64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.metrics)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tradergate_stream_delivery_lag_seconds" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "route" && l.GetValue() == RouteOrderBook {
					return mt.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	t.Fatal("no delivery lag series for the order book")
	return 0
}

// A tally is the histogram a prometheus.Histogram makes of the same
// observations: buckets by upper bound, inclusive.
func TestTallyBuckets(t *testing.T) {
	var x tally
	lags := []time.Duration{-time.Second, 0, 100 * time.Millisecond, 101 * time.Millisecond, time.Second, 400 * time.Second}
	ref := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ref", Buckets: lagBuckets[:]})
	for _, l := range lags {
		x.observe(l)
		ref.Observe(max(l, 0).Seconds())
	}
	var h lagHistogram
	h.add(&x)
	got, want := &dto.Metric{}, &dto.Metric{}
	if err := h.metric(prometheus.NewDesc("ref", "", []string{"route"}, nil), "r").Write(got); err != nil {
		t.Fatal(err)
	}
	if err := ref.Write(want); err != nil {
		t.Fatal(err)
	}
	gb, wb := got.GetHistogram().GetBucket(), want.GetHistogram().GetBucket()
	if len(gb) != len(wb) || got.GetHistogram().GetSampleCount() != want.GetHistogram().GetSampleCount() ||
		got.GetHistogram().GetSampleSum() != want.GetHistogram().GetSampleSum() {
		t.Fatalf("tally %v, want %v", got.GetHistogram(), want.GetHistogram())
	}
	for i := range gb {
		if gb[i].GetUpperBound() != wb[i].GetUpperBound() || gb[i].GetCumulativeCount() != wb[i].GetCumulativeCount() {
			t.Errorf("bucket le=%v: %d, want %d", wb[i].GetUpperBound(), gb[i].GetCumulativeCount(), wb[i].GetCumulativeCount())
		}
	}
}

// BenchmarkFanout hands a read of three events to subscribers on real
// loopback connections (ConnSink), the harness reading each: the
// per-subscriber cost of sendLive and ConnSink.Write, with the kernel's
// writes and reads, per op one read handed to every subscriber.
//
//	go test -run '^$' -bench Fanout -cpuprofile cpu.out ./proxy/stream/
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{100, 1000, 4000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchFanout(b, n, true) })
	}
}

// BenchmarkFanoutHandOff is BenchmarkFanout with subscribers that read
// nothing while it runs: the time a hub takes to hand a read to them (the
// edge's part of the lag, as -cpu 1 and -cpu 2 show with the parallel
// hand-off), without readers on the same CPUs. Each op leaves about 1 KB
// in each socket, which takes tens of them:
//
//	go test -run '^$' -bench FanoutHandOff -benchtime 20x -cpu 1,2 ./proxy/stream/
func BenchmarkFanoutHandOff(b *testing.B) {
	for _, n := range []int{1000, 4000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchFanout(b, n, false) })
	}
}

func benchFanout(b *testing.B, n int, read bool) {
	cfg := Config{MaxPerKey: 2 * n, Routes: map[string]RouteConfig{RouteOrderBook: {Poll: time.Hour}}}
	m, err := New(cfg, Options{Pages: stillBook})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	var clients sync.WaitGroup
	defer clients.Wait()
	stop := make(chan struct{})
	defer close(stop)
	head := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
	subs := openAttached(b, m, n, func(_ int, s *Subscriber) Sink {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		clients.Add(1)
		go func() {
			defer clients.Done()
			if !read {
				<-stop
			}
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		}()
		srv, err := ln.Accept()
		if err != nil {
			b.Fatal(err)
		}
		return NewConnSink(srv, srv, head, s, 10*time.Second)
	})
	defer func() {
		for _, s := range subs {
			s.end(ReasonShuttingDown)
		}
	}()
	h := subs[0].h
	data := []byte(`{"eventType":"price_change","tokenId":"1","price":"0.52","size":"120.5","side":"BUY","indexedTimestamp":1795817397000,"market":"0x` + strings.Repeat("ab", 32) + `"}`)
	b.ResetTimer()
	for i := range b.N {
		var evs []*Event
		for j := range 3 {
			id := fmt.Sprintf("b%08d-%d", i, j)
			evs = append(evs, newEvent(id, "price_change", data, time.Now()))
		}
		h.add(evs, Pos{ID: evs[2].ID})
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/subscriber")
}
