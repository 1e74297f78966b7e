package h2edge_test

import (
	"bytes"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"tradergate/proxy/h2edge"
)

// What an idle HTTP/2 connection costs the server: 1,000 connections
// (plain TCP, in the process) each make one request, read its answer and
// go quiet. Reported: the heap and goroutine stacks per connection,
// less what the same connections cost against a server that only
// accepts and holds them (the clients' side, the sockets).
//
//	go test -run '^$' -bench IdleConn -benchtime 1x ./proxy/h2edge
func BenchmarkIdleConn(b *testing.B) {
	const n = 1000
	for range b.N {
		heap0, stack0 := idleCost(b, n, nil)
		heap1, stack1 := idleCost(b, n, &h2edge.Server{Handler: echo})
		b.ReportMetric((heap1-heap0)/n, "heap-B/conn")
		b.ReportMetric((stack1-stack0)/n, "stack-B/conn")
		b.ReportMetric((heap1-heap0+stack1-stack0)/n, "B/conn")
	}
}

// idleCost opens n connections to srv (nil: a listener that only holds
// them), each making one request, and measures the heap and stacks in
// use once they are idle.
func idleCost(b *testing.B, n int, srv *h2edge.Server) (heap, stack float64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if srv == nil {
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
				continue
			}
			wg.Go(func() { _ = srv.ServeConn(c) })
		}
	})
	// One request's bytes, made once: the preface, SETTINGS, the
	// acknowledgement of the server's, and a GET.
	var req bytes.Buffer
	req.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&req, nil)
	fr.WriteSettings()
	fr.WriteSettingsAck()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "edge"}, {":path", "/x"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})

	base := memNow()
	clients := make([]net.Conn, n)
	buf := make([]byte, 4096)
	for i := range clients {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		clients[i] = c
		if _, err := c.Write(req.Bytes()); err != nil {
			b.Fatal(err)
		}
		if srv != nil {
			// Read until the answer's END_STREAM: its DATA frame ends
			// with the echo's last line.
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			var got []byte
			for !bytes.HasSuffix(got, []byte("GET /x\n")) {
				k, err := c.Read(buf)
				if err != nil {
					b.Fatal(err)
				}
				got = append(got, buf[:k]...)
			}
		}
	}
	time.Sleep(200 * time.Millisecond) // the writers' last flush
	m := memNow()
	heap, stack = float64(m.HeapInuse)-float64(base.HeapInuse), float64(m.StackInuse)-float64(base.StackInuse)
	for _, c := range clients {
		c.Close()
	}
	ln.Close()
	if srv != nil {
		srv.Close()
	}
	for _, c := range held {
		c.Close()
	}
	wg.Wait()
	_, _ = io.Discard.Write(nil)
	return heap, stack
}

func memNow() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}
