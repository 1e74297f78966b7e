package proxy_test

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"tradergate/internal/testkit"
	"tradergate/proxy/config"
	"tradergate/proxy/tlsedge"
)

// BenchmarkH2Hit serves a cached 20-item activity page (gzip) over HTTP/2
// on a real TLS loopback connection, as h2load -m 10 loads it: h2Conns
// connections, each keeping h2Streams requests in flight. The client is
// a bare framer (no net/http), so that what a variant costs above another
// is the edge's (h2edge). writes/op counts the process's write system
// calls per response (/proc/self/io syscw, the client's included: about
// one per request), and cpu-µs/op the process's CPU time per response,
// the client's included.
func BenchmarkH2Hit(b *testing.B) {
	for _, v := range []struct {
		name      string
		streams   int
		conns     int
		identity  bool
		orderbook bool
	}{
		{name: "10streams", streams: 10, conns: 4},
		{name: "1stream", streams: 1, conns: 1},
		{name: "orderbook1000", streams: 10, conns: 4, identity: true, orderbook: true},
	} {
		b.Run(v.name, func(b *testing.B) {
			e, addr := h2BenchEdge(b)
			settled := strconv.FormatInt(time.Now().Unix()-3600, 10)
			path := "/v1/trader/" + e.sim.Wallets()[0] + "/activity?toTimestamp=" + settled
			if v.orderbook {
				path = "/v1/orderbook/events?tokenId=" + e.sim.Markets()[0].Tokens[0] + "&limit=1000&to=" + settled + "000"
			}
			clients := make([]*h2LoadConn, v.conns)
			for i := range clients {
				clients[i] = dialH2Load(b, addr, path, !v.identity)
			}
			h2BenchCheck(b, addr, path, !v.identity)
			var left atomic.Int64
			left.Store(int64(b.N))
			w0, cpu0 := procSyscw(b), procCPU(b)
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, c := range clients {
				wg.Go(func() { c.runShared(b, &left, v.streams) })
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(procSyscw(b)-w0)/float64(b.N), "writes/op")
			b.ReportMetric(float64(procCPU(b)-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
		})
	}
}

// h2BenchEdge is a benchmark edge serving TLS (mode files, a self-signed
// ECDSA P-256 certificate) on a loopback listener.
func h2BenchEdge(b *testing.B) (*edge, string) {
	dir := b.TempDir()
	certFile, keyFile := filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key")
	testkit.SelfSigned(b, "bench", time.Now().Add(24*time.Hour), edgeName).Write(b, certFile, keyFile)
	noPlain := ""
	e := benchEdgeWith(b, withConfig(func(c *config.Config) {
		c.Server.TLS = tlsedge.Config{Mode: tlsedge.ModeFiles, CertFile: certFile, KeyFile: keyFile,
			HTTPListen: &noPlain}
	}))
	return e, e.addr
}

// h2BenchCheck asks for path twice over HTTP/2 with net/http's client,
// and fails unless the second answer is a 200 from the cache: the load
// client counts answers without reading them.
func h2BenchCheck(b *testing.B, addr, path string, gzip bool) {
	tr := &http2.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	defer tr.CloseIdleConnections()
	for i := range 2 {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+keyLimited)
		if gzip {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if i == 1 && (resp.StatusCode != 200 || resp.Header.Get("X-Cache") != "HIT") {
			b.Fatalf("status %d, X-Cache %q", resp.StatusCode, resp.Header.Get("X-Cache"))
		}
	}
}

// procCPU is the CPU time the process has used so far, user and system:
// on a busy machine a steadier measure than the wall clock of ns/op.
func procCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procSyscw is the process's count of write system calls so far.
func procSyscw(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Skipf("no /proc/self/io: %v", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Skip("no syscw in /proc/self/io")
	return 0
}

// h2LoadConn is one HTTP/2 connection of a load client: it sends the same
// GET again and again and counts the answers, nothing more.
type h2LoadConn struct {
	conn   *tls.Conn
	fr     *http2.Framer
	wmu    sync.Mutex // fr's writes
	first  []byte     // the request's header block, adding to the table
	again  []byte     // the same, all indexed
	sent   bool
	nextID uint32
}

func dialH2Load(b *testing.B, addr, path string, gzip bool) *h2LoadConn {
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	if conn.ConnectionState().NegotiatedProtocol != "h2" {
		b.Fatalf("negotiated %q", conn.ConnectionState().NegotiatedProtocol)
	}
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		b.Fatal(err)
	}
	c := &h2LoadConn{conn: conn, fr: http2.NewFramer(conn, conn), nextID: 1}
	c.fr.SetReuseFrames()
	if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30},
		http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20}); err != nil {
		b.Fatal(err)
	}
	if err := c.fr.WriteWindowUpdate(0, 1<<30); err != nil {
		b.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	encode := func() []byte {
		hb.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", edgeName},
			{":path", path}, {"authorization", "Bearer " + keyLimited}} {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		if gzip {
			_ = enc.WriteField(hpack.HeaderField{Name: "accept-encoding", Value: "gzip"})
		}
		return bytes.Clone(hb.Bytes())
	}
	c.first, c.again = encode(), encode()
	return c
}

// send opens the next stream with the request.
func (c *h2LoadConn) send() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	block := c.again
	if !c.sent {
		block, c.sent = c.first, true
	}
	id := c.nextID
	c.nextID += 2
	return c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true})
}

// runShared sends requests while left stays positive, streams at a time,
// and returns once every answer it asked for has ended.
func (c *h2LoadConn) runShared(b *testing.B, left *atomic.Int64, streams int) {
	take := func() bool { return left.Add(-1) >= 0 }
	inFlight := 0
	for range streams {
		if !take() {
			break
		}
		if err := c.send(); err != nil {
			b.Error(err)
			return
		}
		inFlight++
	}
	var unacked uint32
	for inFlight > 0 {
		f, err := c.fr.ReadFrame()
		if err != nil {
			b.Error(err)
			return
		}
		ended := false
		switch f := f.(type) {
		case *http2.DataFrame:
			unacked += uint32(len(f.Data()))
			ended = f.StreamEnded()
		case *http2.HeadersFrame:
			ended = f.StreamEnded()
		case *http2.RSTStreamFrame:
			if f.ErrCode != http2.ErrCodeNo {
				b.Errorf("stream %d reset: %v", f.StreamID, f.ErrCode)
				return
			}
		case *http2.GoAwayFrame:
			b.Errorf("GOAWAY %v", f.ErrCode)
			return
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.wmu.Lock()
				err = c.fr.WriteSettingsAck()
				c.wmu.Unlock()
			}
		}
		if unacked > 1<<24 { // give the connection's window back
			c.wmu.Lock()
			err = c.fr.WriteWindowUpdate(0, unacked)
			c.wmu.Unlock()
			unacked = 0
		}
		if err != nil {
			b.Error(err)
			return
		}
		if ended {
			inFlight--
			if take() {
				if err := c.send(); err != nil {
					b.Error(err)
					return
				}
				inFlight++
			}
		}
	}
}
