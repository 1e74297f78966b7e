package redistest

import (
	"net"
	"sync"
	"testing"
)

// Stalled returns the address of a loopback listener that accepts
// connections and never answers: a Redis that hangs (stuck on a slow
// command, a fork or a full disk), which only a client's dial and read
// deadlines can bound. It needs no redis-server. t.Cleanup closes the
// listener and every connection it accepted.
func Stalled(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redistest: listen: %v", err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	tb.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}
