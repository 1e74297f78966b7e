package limits_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"tradergate/limits"
	"tradergate/proxy/fleet"
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
	d := l.TakeAt(context.Background(), now(), limits.NewBucket("key:example"), plan, "free")
	h := http.Header{}
	var buf []byte
	d.AppendHeaders(&buf, now(), func(name, value string) {
		if value != "" {
			h.Set(name, value)
		}
	})
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

// With the replicas' shared Redis (the redis section), every replica counts
// in the same place, so a key's allowance holds across all of them. The Conn
// is the caller's: the limiter never closes it. Not run: it needs a Redis.
func ExampleNew_sharedRedis() {
	conn, err := fleet.Open(fleet.Config{Addrs: []string{"127.0.0.1:6379"}}, os.Getenv, fleet.Options{})
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	l, err := limits.New(limits.Config{OnStoreError: limits.OnStoreErrorAllow}, map[string]limits.Plan{
		"free": {Requests: 60, Window: time.Minute},
	}, limits.Options{Redis: conn.Client(), RedisPrefix: conn.Key("rl"), RedisTimeout: conn.Timeout()})
	if err != nil {
		panic(err)
	}
	defer l.Close()

	plan, _ := l.Plan("free")
	d := l.TakeAt(context.Background(), time.Now(), limits.NewBucket("key:example"), plan, "free")
	fmt.Println(d.Allowed)
}

func ExampleNewShield() {
	s := limits.NewShield(limits.ShieldConfig{MaxConcurrent: 1, QueueTimeout: 10 * time.Millisecond})
	release, _ := s.Acquire(context.Background())
	fmt.Println("in flight:", s.InFlight())

	_, err := s.Acquire(context.Background()) // the only slot is taken
	var full *limits.ShieldFullError
	fmt.Println(errors.Is(err, limits.ErrShieldFull), errors.As(err, &full) && limits.CeilSeconds(full.RetryAfter) == 1)

	release()
	fmt.Println("in flight:", s.InFlight())
	// Output:
	// in flight: 1
	// true true
	// in flight: 0
}
