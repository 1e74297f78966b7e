package limits

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"tradergate/limits/redistest"
)

// fakeClock is an injected clock (STYLE "Concurrency and time"): windows
// follow it, so window resets are tested without sleeping.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// logBuffer collects log lines from any goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) Count(substr string) int { return strings.Count(b.String(), substr) }

func (b *logBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// storeKinds runs a test against the memory store and against a fresh
// redis-server of its own. Counting tests give Redis a generous
// StoreTimeout: they test counting, and the machine may be loaded.
var storeKinds = []struct {
	name string
	cfg  func(t *testing.T) Config
}{
	{"memory", func(*testing.T) Config { return Config{} }},
	{"redis", func(t *testing.T) Config {
		return Config{RedisURL: redistest.Start(t).URL(), StoreTimeout: countingStoreTimeout}
	}},
}

const countingStoreTimeout = 10 * time.Second

func newLimiter(t testing.TB, cfg Config, opt Options) *Limiter {
	t.Helper()
	l, err := New(cfg, map[string]Plan{"free": {Requests: 60, Window: time.Minute}}, opt)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

// eventually polls cond until it holds or the bounded wait ends; it is for
// recovery that takes a reconnect, not for timing assertions.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var bg = context.Background()

// t0 is a whole second, a quarter second before which tests start, so that
// rounding to whole seconds is exercised.
var t0 = time.Unix(1_800_000_000, 0)
