package limits_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"tradergate/limits"
)

func ExampleNew() {
	// The clock is fixed so the output is stable; leave Now nil in the edge.
	now := func() time.Time { return time.Unix(1_800_000_000, 0) }
	l, err := limits.New(limits.Config{}, map[string]limits.Plan{
		"free": {Requests: 60, Window: time.Minute},
	}, limits.Options{Now: now})
	if err != nil {
		panic(err)
	}
	defer l.Close()

	plan, _ := l.Plan("free")
	d := l.Take(context.Background(), "key:example", plan, "free")
	h := http.Header{}
	d.SetHeaders(h, now())
	fmt.Println(d.Allowed, h.Get("X-RateLimit-Remaining"))
	fmt.Println(h.Get("RateLimit-Policy"))
	// t: this bucket's windows are phase-shifted (window.go), so its
	// window ends 40s after this instant.
	fmt.Println(h.Get("RateLimit"))
	// Output:
	// true 59
	// "free";q=60;w=60
	// "free";r=59;t=40
}

func ExampleNewShield() {
	s := limits.NewShield(limits.ShieldConfig{MaxConcurrent: 1, QueueTimeout: 10 * time.Millisecond})
	release, _ := s.Acquire(context.Background())
	fmt.Println("in flight:", s.InFlight())

	_, err := s.Acquire(context.Background()) // the only slot is taken
	var full *limits.ShieldFullError
	fmt.Println(errors.Is(err, limits.ErrShieldFull), errors.As(err, &full) && full.RetryAfterSeconds() == 1)

	release()
	fmt.Println("in flight:", s.InFlight())
	// Output:
	// in flight: 1
	// true true
	// in flight: 0
}
