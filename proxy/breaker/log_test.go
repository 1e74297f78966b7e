package breaker

import (
	"errors"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestLogWritesInOrder: transitions reach the writer in the order they
// were handed over, on the writer's goroutine.
func TestLogWritesInOrder(t *testing.T) {
	got := make(chan Transition, 3)
	l := NewLog(func(tr Transition) { got <- tr })
	defer l.Close()
	want := []Transition{
		{"tx", gobreaker.StateClosed, gobreaker.StateOpen},
		{"tx", gobreaker.StateOpen, gobreaker.StateHalfOpen},
		{"tx", gobreaker.StateHalfOpen, gobreaker.StateClosed},
	}
	for _, tr := range want {
		l.Changed(tr.Name, tr.From, tr.To)
	}
	for i, w := range want {
		select {
		case tr := <-got:
			if tr != w {
				t.Fatalf("transition %d = %+v, want %+v", i, tr, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("transition %d never written", i)
		}
	}
}

// TestChangedNeverBlocks: with the writer stuck, Changed still returns at
// once, dropping what does not fit; Close then ends the goroutine.
func TestChangedNeverBlocks(t *testing.T) {
	stuck := make(chan struct{})
	l := NewLog(func(Transition) { <-stuck })
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		for range 10 * buffered {
			l.Changed("redis", gobreaker.StateClosed, gobreaker.StateOpen)
		}
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Changed blocked behind a stuck writer")
	}
	close(stuck)
	l.Close()
	l.Close()
}

// TestBreakerCallsChanged: wired as gobreaker's OnStateChange, Changed
// sees the breaker trip.
func TestBreakerCallsChanged(t *testing.T) {
	got := make(chan Transition, 1)
	l := NewLog(func(tr Transition) { got <- tr })
	defer l.Close()
	cb := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name:          "route",
		ReadyToTrip:   func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
		OnStateChange: l.Changed,
	})
	_, _ = cb.Execute(func() (struct{}, error) { return struct{}{}, errors.New("fail") })
	select {
	case tr := <-got:
		if tr != (Transition{"route", gobreaker.StateClosed, gobreaker.StateOpen}) {
			t.Fatalf("got %+v", tr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the trip was never written")
	}
}
