package status

import (
	"testing"
	"time"

	"tradergate/cache"
)

// The Window sits on every request's path: observing must cost a few
// atomic operations and no allocation.

func BenchmarkObserveRequest(b *testing.B) {
	w := NewWindow(WindowOptions{})
	r := Request{Route: "positions_open", Status: 200, Duration: 3 * time.Millisecond, Cache: cache.Hit, KeyID: "key-7"}
	b.ReportAllocs()
	for b.Loop() {
		w.ObserveRequest(r)
	}
}

func BenchmarkObserveRequestParallel(b *testing.B) {
	w := NewWindow(WindowOptions{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := Request{Route: "activity", Status: 200, Duration: 3 * time.Millisecond, Cache: cache.Miss, KeyID: "key-1"}
		for pb.Next() {
			w.ObserveRequest(r)
		}
	})
}

func BenchmarkObserveUpstream(b *testing.B) {
	w := NewWindow(WindowOptions{})
	c := Call{Route: "tx", Status: 200}
	b.ReportAllocs()
	for b.Loop() {
		w.ObserveUpstream(c)
	}
}

func BenchmarkObserveRefused(b *testing.B) {
	w := NewWindow(WindowOptions{})
	b.ReportAllocs()
	for b.Loop() {
		w.ObserveRefused("free")
	}
}

func BenchmarkFill(b *testing.B) {
	w := NewWindow(WindowOptions{})
	for i := range 100 {
		w.ObserveRequest(Request{Route: "tx", Status: 200, KeyID: string(rune('a' + i%26))})
	}
	b.ReportAllocs()
	for b.Loop() {
		var s Snapshot
		w.Fill(&s)
	}
}

func TestObserveDoesNotAllocate(t *testing.T) {
	w := NewWindow(WindowOptions{})
	r := Request{Route: "tx", Status: 503, Duration: time.Second, Cache: cache.Stale, KeyID: "k"}
	w.ObserveRequest(r) // adds the key id: once
	w.ObserveRefused("free")
	if n := testing.AllocsPerRun(100, func() {
		w.ObserveRequest(r)
		w.ObserveUpstream(Call{Route: "tx", Status: 200})
		w.ObserveUpstream(Call{Route: "tx", Err: "timeout"})
		w.ObserveRefused("free")
	}); n != 0 {
		t.Errorf("%v allocations per observation round, want 0", n)
	}
}
