// Package testkit is what the tests of every package share: a clock a test
// moves by hand, a log buffer safe for concurrent writers, one polling
// helper with one time bound, every goroutine's stack (Goroutines),
// self-signed certificates, a server run on
// loopback the way main runs the edge (Serve), and a real server program
// run until it is ready (Process). Its subpackages run real Redis
// (redistest), Prometheus (promtest) and Chromium (browsertest). It is
// imported by tests only, and imports no package of tradergate outside
// internal/testkit.
package testkit

import (
	"bytes"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Clock is a clock the test moves: code under test takes its Now instead
// of time.Now, so no test has to sleep to see time pass. It is the one
// fake clock of every package's tests. Safe for concurrent use; Now takes
// no lock, so benchmarks may read it from every P.
type Clock struct {
	t atomic.Pointer[time.Time]
}

// NewClock returns a clock showing t.
func NewClock(t time.Time) *Clock {
	c := new(Clock)
	c.t.Store(&t)
	return c
}

// Now is the clock's time.
func (c *Clock) Now() time.Time { return *c.t.Load() }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	for {
		old := c.t.Load()
		next := old.Add(d)
		if c.t.CompareAndSwap(old, &next) {
			return
		}
	}
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) { c.t.Store(&t) }

// LogBuffer collects log lines from any goroutine.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Count is how many times substr occurs in what was written.
func (b *LogBuffer) Count(substr string) int { return strings.Count(b.String(), substr) }

// Logger is a JSON slog.Logger at debug level writing into b.
func (b *LogBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// WaitBound is how long Eventually polls before it fails the test:
// generous, because it waits for state another goroutine or process
// reaches (a reconnect, a scrape), never to assert how fast.
const WaitBound = 15 * time.Second

// Eventually polls cond until it holds, failing t with what after
// WaitBound.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(WaitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Goroutines returns the stack of every goroutine, one string each, as
// runtime.Stack writes them, with the buffer grown until the dump fits
// whole. Tests count the goroutines that run a package's code by the
// frames on them, rather than counting every goroutine
// (runtime.NumGoroutine), which moves with goroutines of earlier tests
// still winding down and of the runtime.
func Goroutines() []string {
	buf := make([]byte, 1<<16)
	for {
		if n := runtime.Stack(buf, true); n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}
