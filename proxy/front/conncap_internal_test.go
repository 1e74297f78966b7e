package front

import (
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tradergate/cache"
)

// The default cap is a quarter of the memory limit at connBudget a
// connection, with a floor; the per-address cap a quarter of the total
// unless set, and -1 lifts it.
func TestConnLimits(t *testing.T) {
	var c Config
	c.ApplyDefaults()
	// server.memory_limit's default: 1.5 x the default cache + 32 MiB.
	const def = cache.DefaultMaxBytes + cache.DefaultMaxBytes/2 + 32<<20
	for _, tc := range []struct {
		name                 string
		total, perAddr       int
		limit                int64
		wantTotal, wantPerIP int
	}{
		{"from the process's limit", 0, 0, 1 << 30, 4096, 1024},
		{"no process limit: server.memory_limit's default", 0, 0, math.MaxInt64, int(def / 4 / connBudget), int(def/4/connBudget) / 4},
		{"a small limit: the floor", 0, 0, 64 << 20, minMaxConnections, minMaxConnections / 4},
		{"set", 100, 0, 1 << 30, 100, 25},
		{"set, per address set", 100, 7, 1 << 30, 100, 7},
		{"per address lifted", 100, -1, 1 << 30, 100, 0},
		{"a cap of 1", 1, 0, 1 << 30, 1, 1},
	} {
		c.MaxConnections, c.MaxConnectionsPerAddress = tc.total, tc.perAddr
		total, perAddr := connLimits(c, tc.limit, def)
		if total != tc.wantTotal || perAddr != tc.wantPerIP {
			t.Errorf("%s: connLimits = %d, %d; want %d, %d", tc.name, total, perAddr, tc.wantTotal, tc.wantPerIP)
		}
	}
	// What docs/CONFIGURATION.md states for the default memory limit.
	if got := defaultMaxConnections(def); got != 1664 {
		t.Errorf("default cap with the default memory limit: %d, docs say 1664", got)
	}
}

// The room a descriptor limit leaves for client connections: less the
// page files' quarter and the reserve, none below it.
func TestNofileRoom(t *testing.T) {
	for _, tc := range []struct {
		soft, want uint64
	}{
		{65536, 65536 - 16384 - nofileReserve},
		{4096, 3072 - nofileReserve},
		{1024, 768 - nofileReserve},
		{600, 0},
		{16, 0},
	} {
		if got := nofileRoom(tc.soft); got != tc.want {
			t.Errorf("nofileRoom(%d) = %d, want %d", tc.soft, got, tc.want)
		}
	}
	// The systemd unit's LimitNOFILE holds the default cap.
	if def := uint64(defaultMaxConnections(1 << 30)); nofileRoom(65536) < def {
		t.Errorf("LimitNOFILE=65536 leaves room for %d connections, below the default cap %d", nofileRoom(65536), def)
	}
}

// An accept that fails for want of a resource is counted and retried,
// after 5 ms doubling to a second, until the listener closes; any other
// error is returned as it is.
func TestAcceptRetry(t *testing.T) {
	var got []time.Duration
	for d := time.Duration(0); d < time.Second; {
		d = nextAcceptDelay(d)
		got = append(got, d)
	}
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if !slices.Equal(got, want) {
		t.Errorf("back-off %v, want %v", got, want)
	}
	if d := nextAcceptDelay(time.Second); d != time.Second {
		t.Errorf("after a second: %v", d)
	}

	log := slog.New(slog.DiscardHandler)
	failing := &errListener{err: &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.ENFILE)}}
	c := newConnCap(4, 0, log)
	accepts := &acceptErrors{log: log, open: c.open}
	l := c.listen(accepts.listen(failing, listenerClient))
	done := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Accept returned %v while out of file descriptors", err)
	default:
	}
	l.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Accept did not end with the listener closed")
	}
	// 5+10+20+40 ms fit in 100 ms, 80 more does not: about 5 tries
	// failed (more on a slow machine), not the thousands of a loop that
	// does not wait.
	if n := accepts.count(listenerClient, 1); n < 3 || n > 10 || acceptErrnos[1].reason != "enfile" {
		t.Errorf("%d accepts counted under %s, want about 5", n, acceptErrnos[1].reason)
	}
	if n := accepts.count(listenerClient, 0); n != 0 {
		t.Errorf("%d counted under emfile", n)
	}
	if len(c.slots) != 0 {
		t.Errorf("%d slots held after the failed accepts", len(c.slots))
	}

	other := errors.New("accept: something else")
	c = newConnCap(4, 0, log)
	l = c.listen(accepts.listen(&errListener{err: other}, listenerClient))
	if _, err := l.Accept(); err != other {
		t.Errorf("Accept with another error: %v", err)
	}
	if len(c.slots) != 0 {
		t.Errorf("%d slots held after a failed accept", len(c.slots))
	}
}

// The listeners served by net/http, the plain-HTTP one of a TLS edge and
// the admin one, retry an accept that fails with ENOBUFS as the client
// listener does: net/http's Serve takes it for final (its Temporary() is
// false) and would end, the listener with it.
func TestAcceptRetryEveryListener(t *testing.T) {
	var c Config
	c.ApplyDefaults()
	e := New(c, nil, Options{Log: slog.New(slog.DiscardHandler)})
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.Collectors()...)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	for _, tc := range []struct {
		listener acceptListener
		serve    func(*http.Server, net.Listener) error
	}{
		{listenerHTTP, func(rs *http.Server, ln net.Listener) error { return e.plainServing(rs, ln).serve() }},
		{listenerAdmin, e.ServeAdmin},
	} {
		name := acceptListeners[tc.listener]
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		const failures = 3
		flaky := &flakyListener{Listener: ln, failures: failures,
			err: &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.ENOBUFS)}}
		srv := &http.Server{Handler: ok}
		done := make(chan error, 1)
		go func() { done <- tc.serve(srv, flaky) }()
		client := &http.Client{Timeout: 5 * time.Second}
		resp, err := client.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			select {
			case serr := <-done:
				t.Fatalf("%s: Serve ended with %v", name, serr)
			default:
				t.Fatalf("%s: %v", name, err)
			}
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d", name, resp.StatusCode)
		}
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("%s: Serve ended with %v", name, err)
		}
		if n := acceptErrorsOf(t, reg, name, "enobufs"); n != failures {
			t.Errorf("%s: %v accepts counted under enobufs, want %d", name, n, failures)
		}
	}
}

// acceptErrorsOf is tradergate_accept_errors_total of listener and
// reason, as the registry reg gathers it.
func acceptErrorsOf(t *testing.T, reg *prometheus.Registry, listener, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tradergate_accept_errors_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["listener"] == listener && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no tradergate_accept_errors_total{listener=%q,reason=%q}", listener, reason)
	return 0
}

// flakyListener fails its first failures Accepts with err, then accepts.
type flakyListener struct {
	net.Listener
	err      error
	mu       sync.Mutex
	failures int
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	fail := l.failures > 0
	if fail {
		l.failures--
	}
	l.mu.Unlock()
	if fail {
		return nil, l.err
	}
	return l.Listener.Accept()
}

// errListener fails every Accept with err.
type errListener struct {
	net.Listener
	err error
}

func (l *errListener) Accept() (net.Conn, error) { return nil, l.err }
func (l *errListener) Close() error              { return nil }
