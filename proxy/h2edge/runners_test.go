package h2edge_test

import (
	"bytes"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"tradergate/proxy/h2edge"
)

// goroutineID is the calling goroutine's number, as its stack's first
// line gives it.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := bytes.Cut(bytes.TrimPrefix(buf, []byte("goroutine ")), []byte(" "))
	return string(id)
}

// waitRunners waits (at most 5 s) until the server keeps at most n
// runners, and fails if it still keeps more.
func waitRunners(t *testing.T, srv *h2edge.Server, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); srv.Runners() > n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server keeps %d runners, want at most %d", srv.Runners(), n)
		}
	}
}

// Requests one after the other run their handlers on the same few kept
// goroutines (the handler's and the writes'), not on one new goroutine
// each; once the server's last connection ends, no runner is left.
func TestHandlersRunOnKeptGoroutines(t *testing.T) {
	var mu sync.Mutex
	ran := map[string]int{}
	srv := &h2edge.Server{Handler: func(st *h2edge.Stream) {
		mu.Lock()
		ran[goroutineID()]++
		mu.Unlock()
		echo(st)
	}}
	addr := serve(t, srv)
	c := dialRaw(t, addr)
	const n = 50
	for i := range n {
		id := uint32(2*i + 1)
		c.headers(id, true)
		if status, _, _ := c.answer(id); status != "200" {
			t.Fatalf("request %d: status %s", i, status)
		}
		// The answer can arrive before the runners that made it wait
		// again: the next request would find none waiting, and start one.
		for deadline := time.Now().Add(5 * time.Second); h2edge.IdleRunners(srv) < srv.Runners(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d runners wait after an answer", h2edge.IdleRunners(srv), srv.Runners())
			}
		}
	}
	mu.Lock()
	goroutines := len(ran)
	mu.Unlock()
	// Handlers and writes share the runners: each request's handler
	// finds one of the two waiting (a runner counted as waiting an
	// instant before it waits may still cost one more now and then),
	// where a goroutine per request would make 50.
	if goroutines > 4 {
		t.Errorf("%d requests ran on %d goroutines, want a few: %v", n, goroutines, ran)
	}
	if k := srv.Runners(); k < 1 || k > 4 {
		t.Errorf("the server keeps %d runners, want a few", k)
	}
	c.nc.Close()
	waitRunners(t, srv, 0)
}

// writerConn records which goroutine made each Write.
type writerConn struct {
	net.Conn
	mu      sync.Mutex
	writers []string
}

func (c *writerConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writers = append(c.writers, goroutineID())
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *writerConn) lastWriter() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writers[len(c.writers)-1]
}

// A handler's answer is written by the handler's own goroutine once it
// returns, not handed to another runner: a request costs one goroutine
// switch fewer.
func TestHandlersWriteTheirOwnAnswers(t *testing.T) {
	handlers := make(chan string, 1)
	srv := &h2edge.Server{Handler: func(st *h2edge.Stream) {
		handlers <- goroutineID()
		echo(st)
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wc := make(chan *writerConn, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		c := &writerConn{Conn: nc}
		wc <- c
		_ = srv.ServeConn(c)
	})
	t.Cleanup(func() {
		ln.Close()
		srv.Close()
		wg.Wait()
	})
	c := dialRaw(t, ln.Addr().String())
	server := <-wc
	// The server's acknowledgement of the client's SETTINGS is the last
	// frame it writes unasked.
	for {
		if f, ok := c.read().(*http2.SettingsFrame); ok && f.IsAck() {
			break
		}
	}
	for i := range 20 {
		// A writer still at work (the settings' exchange, at first) takes
		// what is appended meanwhile, the answer too: each request is
		// sent when every runner waits.
		for deadline := time.Now().Add(5 * time.Second); h2edge.IdleRunners(srv) < srv.Runners(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d runners wait", h2edge.IdleRunners(srv), srv.Runners())
			}
		}
		id := uint32(2*i + 1)
		c.headers(id, true)
		if status, _, _ := c.answer(id); status != "200" {
			t.Fatalf("request %d: status %s", i, status)
		}
		handler := <-handlers
		if w := server.lastWriter(); w != handler {
			t.Fatalf("request %d: its handler ran on goroutine %s, its answer was written by %s", i, handler, w)
		}
	}
}

// After a burst of handlers that all ran at once, the server keeps at most
// MaxIdleRunners of their goroutines waiting for the next.
func TestIdleRunnersAreBounded(t *testing.T) {
	const streams = 200 // per connection, below the default 250
	conns := h2edge.MaxIdleRunners/streams + 2
	all := conns * streams
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(all)
	srv := &h2edge.Server{Handler: func(st *h2edge.Stream) {
		started.Done()
		<-release
		echo(st)
	}}
	addr := serve(t, srv)
	raw := make([]*rawConn, conns)
	for k := range raw {
		c := dialRaw(t, addr)
		raw[k] = c
		for i := range streams {
			c.headers(uint32(2*i+1), true)
		}
	}
	started.Wait()
	if k := srv.Runners(); k < all {
		t.Fatalf("%d handlers run on %d runners", all, k)
	}
	close(release)
	for _, c := range raw {
		for ended := 0; ended < streams; {
			switch f := c.next().(type) {
			case *http2.MetaHeadersFrame:
				if f.StreamEnded() {
					ended++
				}
			case *http2.DataFrame:
				if f.StreamEnded() {
					ended++
				}
			default:
				t.Fatalf("read %v", f)
			}
		}
	}
	waitRunners(t, srv, h2edge.MaxIdleRunners)
	if k := srv.Runners(); k != h2edge.MaxIdleRunners {
		t.Errorf("the server keeps %d runners after the burst, want %d", k, h2edge.MaxIdleRunners)
	}
}
