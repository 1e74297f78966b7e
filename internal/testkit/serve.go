package testkit

import (
	"context"
	"net"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// Server is what Serve runs: a server that serves a listener until its
// context ends, the way main runs the edge (proxy.Server.Serve).
type Server interface {
	Serve(ctx context.Context, ln net.Listener) error
}

// Serve runs srv on a fresh loopback listener until the test ends, or
// until stop is called, and returns the listener's host:port. wait
// returns what Serve returned, once it has; any number of calls return
// the same. The test's cleanup stops srv and waits for it, so nothing it
// started outlives the test.
//
// Tests of the edge reach it through Serve, not through an httptest
// server around one of its handlers: a plain listener is served by the
// same front as in production (fasthttp for HTTP/1.1).
func Serve(tb testing.TB, srv Server) (addr string, stop context.CancelFunc, wait func() error) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, ln) }()
	wait = sync.OnceValue(func() error { return <-errc })
	tb.Cleanup(func() {
		cancel()
		_ = wait()
	})
	return ln.Addr().String(), cancel, wait
}

// FasthttpGoroutines are goleak options for fasthttp's own goroutines, for
// the TestMain of a package whose tests Serve an edge: the Date header's
// once-a-second updater, started once per process and never stopped (by
// design), a stopped server's worker-pool cleaner, which returns when its
// sleep of MaxIdleWorkerDuration ends, and a closed legacy client's
// connection cleaner, which returns when its sleep of MaxIdleConnDuration
// ends with no connection left (HostClient has no Close).
var FasthttpGoroutines = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
}

// ToxiproxyGoroutines are goleak options for toxiproxy's own goroutines,
// for the TestMain of a package whose tests run a toxiproxy in process.
// A link's chunks go through channels whose ends do not watch each
// other's interrupt (v2.5.0), so a proxy stopped (or a link closed) while
// a chunk is in flight leaves one of two goroutines blocked for good: the
// noop toxic sending on its stub's output (toxics/noop.go), or the link's
// reader sending the chunk it has just read into the toxic chain's input
// (stream/io_chan.go's ChanWriter, from link.go's read), once the stub
// that read that input has stopped. Both are toxiproxy's, hold no
// connection of the edge's, and turn up only when a fault stops Redis's
// proxy mid-transfer.
var ToxiproxyGoroutines = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe"),
	goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/stream.(*ChanWriter).Write"),
}

// TCPPair returns the two ends of a loopback TCP connection, both closed
// when the test ends: for tests of code that works on a socket itself
// (raw reads and writes, socket options, lingering closes).
func TCPPair(tb testing.TB) (client, server net.Conn) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = client.Close() })
	server, err = ln.Accept()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = server.Close() })
	return client, server
}
