package proxy_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"tradergate/internal/testkit"
	"tradergate/proxy/config"
	"tradergate/proxy/tlsedge"
)

// What an idle stream costs the edge, over what the same connection
// costs idle: n clients (raw connections in the process, with no
// goroutine of their own, so that the clients' side is the same in both
// cases) each either make one request and go quiet (an idle keep-alive
// connection), or open a quiet stream (order book snapshots only, which
// come every ten minutes) and read its head. Reported per connection:
// the heap and goroutine stacks in use in each case, and their
// difference, what one idle subscriber costs (B/sub).
//
//	go test -run '^$' -bench StreamIdle -benchtime 1x ./proxy
func BenchmarkStreamIdle(b *testing.B) {
	for _, front := range []string{"h1", "h1-tls", "h2-tls"} {
		b.Run(front, func(b *testing.B) {
			const n = 500
			dir := b.TempDir()
			certFile, keyFile := filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key")
			kp := testkit.SelfSigned(b, "bench", time.Now().Add(time.Hour), edgeName)
			kp.Write(b, certFile, keyFile)
			e := newEdge(b, withSim(liveSim()), withConfig(func(c *config.Config) {
				c.Streams.MaxPerKey = 10 * n
				c.Server.MaxConnections = 10 * n
				c.Server.MaxConnectionsPerAddress = -1
				if front != "h1" {
					none := ""
					c.Server.TLS = tlsedge.Config{Mode: tlsedge.ModeFiles, CertFile: certFile, KeyFile: keyFile, HTTPListen: &none}
					c.Server.TLS.ApplyDefaults()
				}
			}))
			token := e.sim.Markets()[0].Tokens[0]
			stream := "/v1/orderbook/stream?eventType=book&tokenId=" + token
			page := "/v1/tx/" + e.sim.TradeTxs()[0]
			dial := func() net.Conn {
				c, err := net.Dial("tcp", e.addr)
				if err != nil {
					b.Fatal(err)
				}
				switch front {
				case "h1-tls":
					return tlsClient(b, c, kp, "http/1.1")
				case "h2-tls":
					return tlsClient(b, c, kp, "h2")
				}
				return c
			}
			open := func(path string, isStream bool) net.Conn {
				c := dial()
				c.SetDeadline(time.Now().Add(20 * time.Second))
				if front == "h2-tls" {
					h2Request(b, c, path, isStream)
				} else {
					h1Request(b, c, path, isStream)
				}
				return c
			}
			warm := open(stream, true) // the stream's hub, shared by all
			defer warm.Close()
			for range b.N {
				idle := cost(b, n, func() net.Conn { return open(page, false) })
				streams := cost(b, n, func() net.Conn { return open(stream, true) })
				b.ReportMetric(idle, "B/idle-conn")
				b.ReportMetric(streams, "B/stream-conn")
				b.ReportMetric(streams-idle, "B/sub")
			}
		})
	}
}

// cost opens n connections with open and returns the heap and stacks in
// use per connection once they are quiet.
func cost(b *testing.B, n int, open func() net.Conn) float64 {
	base := memNow()
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = open()
	}
	time.Sleep(500 * time.Millisecond)
	m := memNow()
	for _, c := range conns {
		c.Close()
	}
	time.Sleep(500 * time.Millisecond) // the edge lets them go
	return (float64(m.HeapInuse+m.StackInuse) - float64(base.HeapInuse+base.StackInuse)) / float64(n)
}

func memNow() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

func tlsClient(b *testing.B, c net.Conn, kp testkit.KeyPair, proto string) net.Conn {
	tc := tls.Client(c, &tls.Config{RootCAs: kp.Pool(), ServerName: edgeName, NextProtos: []string{proto}})
	if err := tc.Handshake(); err != nil {
		b.Fatal(err)
	}
	return tc
}

// h1Request sends a GET and reads its answer whole, or a stream's head
// and first chunk.
func h1Request(b *testing.B, c net.Conn, path string, isStream bool) {
	io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer "+keyAll+"\r\n\r\n")
	r := bufio.NewReaderSize(c, 512)
	resp, err := http.ReadResponse(r, nil)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("%s: %v %v", path, resp, err)
	}
	if isStream {
		line, err := r.ReadString('\n') // the first chunk's size line
		if err != nil || line == "" {
			b.Fatal(err)
		}
		return
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		b.Fatal(err)
	}
}

// h2Request opens an HTTP/2 connection with one GET and reads its answer
// whole, or a stream's head and first DATA frame.
func h2Request(b *testing.B, c net.Conn, path string, isStream bool) {
	var req bytes.Buffer
	req.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&req, nil)
	fr.WriteSettings()
	fr.WriteSettingsAck()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", edgeName}, {":path", path}, {"authorization", "Bearer " + keyAll}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
	if _, err := c.Write(req.Bytes()); err != nil {
		b.Fatal(err)
	}
	rd := http2.NewFramer(nil, c)
	for {
		f, err := rd.ReadFrame()
		if err != nil {
			b.Fatal(err)
		}
		if d, ok := f.(*http2.DataFrame); ok && d.StreamID == 1 && (isStream || d.StreamEnded()) {
			if isStream && !strings.HasPrefix(string(d.Data()), "retry:") {
				b.Fatalf("first DATA %q", d.Data())
			}
			return
		}
	}
}
