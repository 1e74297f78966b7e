package h2edge

import (
	"sync/atomic"
	"testing"
	"time"
)

// Once parkFreeMin connections have parked and none has for parkQuiet,
// the server returns memory once; more parks within parkFreeEvery wait
// for it.
func TestParkedReturnsMemory(t *testing.T) {
	var returned atomic.Int32
	s := &Server{MemoryReturned: func() { returned.Add(1) }}
	for range parkFreeMin - 1 {
		s.parked()
	}
	time.Sleep(parkQuiet + 200*time.Millisecond)
	if n := returned.Load(); n != 0 {
		t.Fatalf("memory returned %d times below %d parks", n, parkFreeMin)
	}
	start := time.Now()
	s.parked()
	for returned.Load() == 0 && time.Since(start) < 2*parkQuiet {
		time.Sleep(20 * time.Millisecond)
	}
	if n, took := returned.Load(), time.Since(start); n != 1 || took < parkQuiet {
		t.Fatalf("memory returned %d times, %v after the last park; want once, after %v", n, took, parkQuiet)
	}
	for range parkFreeMin {
		s.parked()
	}
	time.Sleep(parkQuiet + 500*time.Millisecond)
	if n := returned.Load(); n != 1 {
		t.Fatalf("memory returned %d times within %v", n, parkFreeEvery)
	}
	s.parkMu.Lock()
	pending := s.freeTimer != nil
	if pending {
		s.freeTimer.Stop()
	}
	s.parkMu.Unlock()
	if !pending {
		t.Error("no return pending after the second burst")
	}
}
