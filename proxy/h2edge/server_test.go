package h2edge_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"tradergate/internal/testkit"
	"tradergate/proxy/h2edge"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve runs srv on a loopback listener (HTTP/2 with prior knowledge, no
// TLS: h2edge takes a connection whose protocol is settled) until the
// test ends.
func serve(t testing.TB, srv *h2edge.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { _ = srv.ServeConn(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		srv.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

// echo answers 200 with the request's method, path and fields in the body.
func echo(st *h2edge.Stream) {
	var b strings.Builder
	b.WriteString(st.Method + " " + st.Path + "\n")
	for _, f := range st.Fields {
		b.WriteString(f.Name + ": " + f.Value + "\n")
	}
	st.Status(200)
	st.Field(h2edge.NewName("Content-Type"), "text/plain")
	st.Field(h2edge.NewName("X-Request-Id"), "abc")
	if st.Method == http.MethodHead {
		st.Send(nil)
		return
	}
	st.Send([]byte(b.String()))
}

func h2client() *http.Client {
	tr := &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	return &http.Client{Transport: tr}
}

func TestServesRequestsWithGoClient(t *testing.T) {
	addr := serve(t, &h2edge.Server{Handler: echo})
	c := h2client()
	defer c.CloseIdleConnections()
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		req, _ := http.NewRequest(method, "http://"+addr+"/v1/tx/0xab?x=1", nil)
		req.Header.Set("Authorization", "Bearer k")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" {
			t.Fatalf("%s: %d %s", method, resp.StatusCode, resp.Proto)
		}
		if resp.Header.Get("Content-Type") != "text/plain" || resp.Header.Get("X-Request-Id") != "abc" {
			t.Errorf("%s: fields %v", method, resp.Header)
		}
		want := ""
		if method == http.MethodGet {
			want = "GET /v1/tx/0xab?x=1\n"
		}
		if !strings.HasPrefix(string(body), want) || (method == http.MethodGet && !strings.Contains(string(body), "authorization: Bearer k\n")) {
			t.Errorf("%s: body %q", method, body)
		}
	}
}

func TestStatusCodes(t *testing.T) {
	addr := serve(t, &h2edge.Server{Handler: func(st *h2edge.Stream) {
		code, _ := strconv.Atoi(strings.TrimPrefix(st.Path, "/"))
		st.Status(code)
		st.Send(nil)
	}})
	c := h2client()
	defer c.CloseIdleConnections()
	for _, code := range []int{200, 204, 206, 304, 400, 404, 500, 429, 431, 503} {
		resp, err := c.Get("http://" + addr + "/" + strconv.Itoa(code))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != code {
			t.Errorf("sent %d, read %d", code, resp.StatusCode)
		}
	}
}

// rawConn is an HTTP/2 client made of a bare framer, for what Go's client
// would not send.
type rawConn struct {
	t   testing.TB
	nc  net.Conn
	fr  *http2.Framer
	enc *hpack.Encoder
	buf bytes.Buffer
}

func dialRaw(t testing.TB, addr string, settings ...http2.Setting) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	c := &rawConn{t: t, nc: nc}
	c.fr = http2.NewFramer(nc, nc)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.enc = hpack.NewEncoder(&c.buf)
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := c.fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	// The server's SETTINGS come first; acknowledge them.
	f := c.read()
	if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
		t.Fatalf("first frame %v", f)
	}
	if err := c.fr.WriteSettingsAck(); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *rawConn) read() http2.Frame {
	c.t.Helper()
	f, err := c.fr.ReadFrame()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return f
}

// next reads until a frame that is not a SETTINGS acknowledgement or a
// WINDOW_UPDATE (the server's answers to what the client sent).
func (c *rawConn) next() http2.Frame {
	c.t.Helper()
	for {
		switch f := c.read().(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				return f
			}
		case *http2.WindowUpdateFrame:
		default:
			return f
		}
	}
}

func (c *rawConn) headers(id uint32, end bool, fields ...string) {
	c.t.Helper()
	if err := c.tryHeaders(id, end, fields...); err != nil {
		c.t.Fatal(err)
	}
}

// tryHeaders sends a request's HEADERS: GET https://edge/x, but for what
// fields set.
func (c *rawConn) tryHeaders(id uint32, end bool, fields ...string) error {
	c.buf.Reset()
	all := append([]string{":method", "GET", ":scheme", "https", ":authority", "edge", ":path", "/x"}, fields...)
	seen := map[string]bool{}
	for i := 0; i < len(fields); i += 2 {
		seen[fields[i]] = true
	}
	for i := 0; i < len(all); i += 2 {
		if i < 8 && seen[all[i]] {
			continue // overridden by fields
		}
		c.enc.WriteField(hpack.HeaderField{Name: all[i], Value: all[i+1]})
	}
	return c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.buf.Bytes(), EndStream: end, EndHeaders: true})
}

func (c *rawConn) wantRST(id uint32, codes ...http2.ErrCode) {
	c.t.Helper()
	f := c.next()
	rst, ok := f.(*http2.RSTStreamFrame)
	if !ok || rst.StreamID != id {
		c.t.Fatalf("want RST_STREAM on %d, read %v", id, f)
	}
	for _, code := range codes {
		if rst.ErrCode == code {
			return
		}
	}
	c.t.Fatalf("RST_STREAM %v, want one of %v", rst.ErrCode, codes)
}

func (c *rawConn) wantGoAway(code http2.ErrCode) *http2.GoAwayFrame {
	c.t.Helper()
	f := c.next()
	ga, ok := f.(*http2.GoAwayFrame)
	if !ok || ga.ErrCode != code {
		c.t.Fatalf("want GOAWAY %v, read %v", code, f)
	}
	return ga
}

// answer reads one stream's whole answer: status, fields and body.
func (c *rawConn) answer(id uint32) (string, []hpack.HeaderField, []byte) {
	c.t.Helper()
	var status string
	var fields []hpack.HeaderField
	var body []byte
	for {
		switch f := c.next().(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamID != id {
				c.t.Fatalf("headers on %d, want %d", f.StreamID, id)
			}
			status, fields = f.PseudoValue("status"), f.RegularFields()
			if f.StreamEnded() {
				return status, fields, body
			}
		case *http2.DataFrame:
			if f.StreamID != id {
				c.t.Fatalf("data on %d, want %d", f.StreamID, id)
			}
			body = append(body, f.Data()...)
			if f.StreamEnded() {
				return status, fields, body
			}
		default:
			c.t.Fatalf("stream %d: read %v", id, f)
		}
	}
}

// Flow control: the answer goes out as the client's windows allow, and
// no further.
func TestFlowControl(t *testing.T) {
	page := bytes.Repeat([]byte("0123456789"), 10000) // 100 KB
	addr := serve(t, &h2edge.Server{Handler: func(st *h2edge.Stream) {
		st.Status(200)
		st.Send(page)
	}})
	c := dialRaw(t, addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1000})
	c.headers(1, true)
	if f, ok := c.next().(*http2.MetaHeadersFrame); !ok || f.PseudoValue("status") != "200" {
		t.Fatalf("read %v", f)
	}
	var got []byte
	read := func(want int) {
		t.Helper()
		for n := 0; n < want; {
			d, ok := c.next().(*http2.DataFrame)
			if !ok {
				t.Fatalf("want DATA")
			}
			n += len(d.Data())
			got = append(got, d.Data()...)
			if n > want {
				t.Fatalf("%d bytes sent on a window of %d", n, want)
			}
		}
	}
	read(1000) // the stream's window
	// The connection's window (65,535) is next to run out.
	if err := c.fr.WriteWindowUpdate(1, 1<<20); err != nil {
		t.Fatal(err)
	}
	read(65535 - 1000)
	// Nothing more until the connection's window opens: a PING's answer
	// comes before any DATA.
	if err := c.fr.WritePing(false, [8]byte{1}); err != nil {
		t.Fatal(err)
	}
	if p, ok := c.next().(*http2.PingFrame); !ok || !p.IsAck() {
		t.Fatalf("want the PING's answer, read %v", p)
	}
	if err := c.fr.WriteWindowUpdate(0, 1<<20); err != nil {
		t.Fatal(err)
	}
	read(len(page) - 65535)
	if !bytes.Equal(got, page) {
		t.Errorf("the page came back changed")
	}
	// A window lowered by SETTINGS after the fact can go negative; the
	// next answer waits until it is positive again.
	if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	c.headers(3, true)
	if f, ok := c.next().(*http2.MetaHeadersFrame); !ok || f.StreamID != 3 {
		t.Fatalf("read %v", f)
	}
	if err := c.fr.WritePing(false, [8]byte{2}); err != nil {
		t.Fatal(err)
	}
	if p, ok := c.next().(*http2.PingFrame); !ok || !p.IsAck() {
		t.Fatalf("want the PING's answer before any DATA on a zero window, read %v", p)
	}
	if err := c.fr.WriteWindowUpdate(3, 10); err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	read(10)
}

// Stream limits: past MaxConcurrentStreams a stream is refused, and the
// others are served.
func TestConcurrentStreamLimit(t *testing.T) {
	release := make(chan struct{})
	addr := serve(t, &h2edge.Server{MaxConcurrentStreams: 2, Handler: func(st *h2edge.Stream) {
		<-release
		st.Status(200)
		st.Send([]byte("ok"))
	}})
	c := dialRaw(t, addr)
	c.headers(1, true)
	c.headers(3, true)
	c.headers(5, true)
	c.wantRST(5, http2.ErrCodeRefusedStream, http2.ErrCodeProtocol)
	close(release)
	seen := map[uint32]bool{}
	for len(seen) < 2 {
		switch f := c.next().(type) {
		case *http2.MetaHeadersFrame:
		case *http2.DataFrame:
			if f.StreamEnded() {
				seen[f.StreamID] = true
			}
		default:
			t.Fatalf("read %v", f)
		}
	}
	if !seen[1] || !seen[3] {
		t.Errorf("answered %v", seen)
	}
}

// Shutdown sends GOAWAY naming the last stream begun; that stream is
// still answered, a later one is not, and the connection then closes.
func TestShutdownDrains(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	srv := &h2edge.Server{Handler: func(st *h2edge.Stream) {
		started <- struct{}{}
		<-release
		st.Status(200)
		st.Send([]byte("late"))
	}}
	addr := serve(t, srv)
	c := dialRaw(t, addr)
	c.headers(1, true)
	<-started
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(context.Background()) }()
	ga := c.wantGoAway(http2.ErrCodeNo)
	if ga.LastStreamID != 1 {
		t.Errorf("GOAWAY's last stream %d, want 1", ga.LastStreamID)
	}
	c.headers(3, true) // after the GOAWAY: ignored
	close(release)
	if status, _, body := c.answer(1); status != "200" || string(body) != "late" {
		t.Errorf("stream 1 answered %s %q", status, body)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := c.fr.ReadFrame(); err == nil {
		t.Errorf("the connection is still open after Shutdown")
	}
	if err := srv.ServeConn(nopConn()); !errors.Is(err, h2edge.ErrServerClosed) {
		t.Errorf("ServeConn after Shutdown: %v", err)
	}
}

// Shutdown with a stream that never ends gives up with ctx.
func TestShutdownTimesOut(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	srv := &h2edge.Server{Handler: func(st *h2edge.Stream) {
		started <- struct{}{}
		<-release
		st.Status(200)
		st.Send(nil)
	}}
	addr := serve(t, srv)
	c := dialRaw(t, addr)
	c.headers(1, true)
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown: %v", err)
	}
	close(release)
}

func nopConn() net.Conn {
	a, b := net.Pipe()
	b.Close()
	return a
}

// A header list past MaxHeaderListSize reaches the handler, marked.
func TestHeaderListTooLarge(t *testing.T) {
	addr := serve(t, &h2edge.Server{MaxHeaderListSize: 1000, Handler: func(st *h2edge.Stream) {
		st.Status(200)
		if st.TooLarge {
			st.Status(431)
		}
		st.Send(nil)
	}})
	c := dialRaw(t, addr)
	big := strings.Repeat("a", 400)
	c.headers(1, true, "x-a", big, "x-b", big, "x-c", big)
	if status, _, _ := c.answer(1); status != "431" {
		t.Errorf("status %s, want 431", status)
	}
	c.headers(3, true, "x-small", "a")
	if status, _, _ := c.answer(3); status != "200" {
		t.Errorf("status %s, want 200", status)
	}
}

// A client's RST_STREAM cancels the handler's context.
func TestResetCancelsHandler(t *testing.T) {
	gone := make(chan struct{})
	started := make(chan struct{})
	addr := serve(t, &h2edge.Server{Handler: func(st *h2edge.Stream) {
		close(started)
		<-st.Context().Done()
		close(gone)
		st.Status(200)
		st.Send([]byte("too late"))
	}})
	c := dialRaw(t, addr)
	c.headers(1, true)
	<-started
	if err := c.fr.WriteRSTStream(1, http2.ErrCodeCancel); err != nil {
		t.Fatal(err)
	}
	<-gone
	// Nothing is sent on the reset stream: the next frame is the PING's.
	if err := c.fr.WritePing(false, [8]byte{7}); err != nil {
		t.Fatal(err)
	}
	if p, ok := c.next().(*http2.PingFrame); !ok || p.Data != [8]byte{7} {
		t.Fatalf("read %v", p)
	}
}

// Bodies: one within MaxRequestBody is read and the handler told; a body
// longer than its content-length is a stream error; a handler that
// answers before the body ends stops it with RST_STREAM(NO_ERROR).
func TestRequestBodies(t *testing.T) {
	addr := serve(t, &h2edge.Server{MaxRequestBody: 10, Handler: func(st *h2edge.Stream) {
		st.Status(200)
		if st.Body {
			st.Status(413)
		}
		st.Send(nil)
	}})
	c := dialRaw(t, addr)

	c.headers(1, false, ":method", "POST", "content-length", "3")
	c.fr.WriteData(1, true, []byte("abc"))
	if status, _, _ := c.answer(1); status != "413" {
		t.Errorf("status %s, want 413", status)
	}

	c.headers(3, false, ":method", "POST", "content-length", "3")
	c.fr.WriteData(3, false, []byte("abcde"))
	c.wantRST(3, http2.ErrCodeProtocol)

	// An empty body that only ends the stream is no body.
	c.headers(5, false)
	c.fr.WriteData(5, true, nil)
	if status, _, _ := c.answer(5); status != "200" {
		t.Errorf("status %s, want 200", status)
	}

	// Past MaxRequestBody the request is answered while the body goes on.
	c.headers(7, false, ":method", "POST")
	c.fr.WriteData(7, false, bytes.Repeat([]byte("x"), 11))
	if status, _, _ := c.answer(7); status != "413" {
		t.Errorf("status %s, want 413", status)
	}
	c.wantRST(7, http2.ErrCodeNo)
}

// Malformed requests are stream errors (RFC 9113 section 8.1.1): the
// connection goes on.
func TestMalformedRequests(t *testing.T) {
	addr := serve(t, &h2edge.Server{Handler: echo})
	c := dialRaw(t, addr)
	id := uint32(1)
	for _, fields := range [][]string{
		{"connection", "keep-alive"},
		{"te", "gzip"},
		{"upgrade", "h2c"},
		{":path", ""},
		{":scheme", "ftp"},
		{"content-length", "x"},
	} {
		c.headers(id, true, fields...)
		c.wantRST(id, http2.ErrCodeProtocol)
		id += 2
	}
	c.headers(id, true, "te", "trailers")
	if status, _, _ := c.answer(id); status != "200" {
		t.Errorf("status %s", status)
	}
}

// A handler that panics, or returns without answering, costs its stream
// only.
func TestHandlerWithoutAnswer(t *testing.T) {
	addr := serve(t, &h2edge.Server{Handler: func(st *h2edge.Stream) {
		switch st.Path {
		case "/panic":
			panic("boom")
		case "/silent":
			return
		case "/no-status":
			st.Send([]byte("x"))
			return
		}
		echo(st)
	}})
	c := dialRaw(t, addr)
	c.headers(1, true, ":path", "/panic")
	c.wantRST(1, http2.ErrCodeInternal)
	c.headers(3, true, ":path", "/silent")
	c.wantRST(3, http2.ErrCodeInternal)
	c.headers(5, true, ":path", "/no-status")
	c.wantRST(5, http2.ErrCodeInternal)
	c.headers(7, true)
	if status, _, _ := c.answer(7); status != "200" {
		t.Errorf("status %s", status)
	}
}

// Connection errors end the connection with GOAWAY.
func TestConnectionErrors(t *testing.T) {
	addr := serve(t, &h2edge.Server{Handler: echo})
	for name, send := range map[string]func(c *rawConn){
		"even stream":         func(c *rawConn) { c.headers(2, true) },
		"stream id goes down": func(c *rawConn) { c.headers(5, true); c.answer(5); c.headers(3, true) },
		"window overflow":     func(c *rawConn) { c.fr.WriteWindowUpdate(0, 1<<31-1) },
		"data on idle stream": func(c *rawConn) { c.fr.WriteData(9, true, []byte("x")) },
	} {
		t.Run(name, func(t *testing.T) {
			c := dialRaw(t, addr)
			send(c)
			for {
				f, err := c.fr.ReadFrame()
				if err != nil {
					t.Fatalf("connection ended without GOAWAY: %v", err)
				}
				if ga, ok := f.(*http2.GoAwayFrame); ok {
					if ga.ErrCode == http2.ErrCodeNo {
						t.Errorf("GOAWAY without an error")
					}
					return
				}
			}
		})
	}
}

// After a connection error's GOAWAY the server reads what the client
// still sends for a moment, so that the GOAWAY is read rather than lost
// to a reset, but not without bound: a client that goes on sending is
// cut off after 1 MiB, long before the linger's second.
func TestLingerAfterGoAwayIsBounded(t *testing.T) {
	addr := serve(t, &h2edge.Server{Handler: echo})
	c := dialRaw(t, addr)
	c.headers(2, true) // an even stream: a connection error
	c.wantGoAway(http2.ErrCodeProtocol)
	start := time.Now()
	junk := make([]byte, 64<<10)
	for time.Since(start) < 5*time.Second {
		if _, err := c.nc.Write(junk); err != nil {
			if waited := time.Since(start); waited > 900*time.Millisecond {
				t.Errorf("the server read for %v after its GOAWAY", waited)
			}
			return
		}
	}
	t.Fatal("the server still read after 5 s")
}

// An idle connection is closed after IdleTimeout, with GOAWAY.
func TestIdleTimeout(t *testing.T) {
	addr := serve(t, &h2edge.Server{Handler: echo, IdleTimeout: 100 * time.Millisecond})
	c := dialRaw(t, addr)
	c.headers(1, true)
	c.answer(1)
	c.wantGoAway(http2.ErrCodeNo)
}

// Many streams answered at once on one connection, through Go's client:
// each answer whole and its own.
func TestManyStreams(t *testing.T) {
	addr := serve(t, &h2edge.Server{Handler: echo})
	c := h2client()
	defer c.CloseIdleConnections()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			path := "/p/" + strings.Repeat("x", i)
			resp, err := c.Get("http://" + addr + path)
			if err != nil {
				t.Error(err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.HasPrefix(string(body), "GET "+path+"\n") {
				t.Errorf("%s: %q", path, body)
			}
		})
	}
	wg.Wait()
}

// A client that asks for answers (PING) and reads none is cut off once
// what waits for it passes the writer's bound, rather than held in
// memory without end. Over net.Pipe, whose writes wait for a reader, the
// server's first write never ends, as with a client whose window and
// socket buffers are full.
func TestClientThatDoesNotReadIsCutOff(t *testing.T) {
	srv := &h2edge.Server{Handler: echo}
	client, server := net.Pipe()
	defer client.Close()
	done := make(chan error, 1)
	go func() { done <- srv.ServeConn(server) }()
	client.SetDeadline(time.Now().Add(20 * time.Second))
	fr := http2.NewFramer(client, client)
	if _, err := io.WriteString(client, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	// Each PING is answered with 17 bytes: the bound (1 MiB) is passed
	// after some 62,000 of them.
	var err error
	i := 0
	for ; i < 200_000 && err == nil; i++ {
		if i == 0 {
			err = fr.WriteSettings()
			continue
		}
		err = fr.WritePing(false, [8]byte{byte(i)})
	}
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("the server is still reading a client that has read nothing (%d frames: %v)", i, err)
	}
	client.Close()
	<-done
}

// An idle connection holds one goroutine, its read loop: its writes run on
// one of the server's runners while there is something to write, and the
// runner goes back to the server's once it is written. A PING on the idle
// connection hands it writes again for the ACK.
func TestIdleConnHoldsNoWriter(t *testing.T) {
	const n = 8
	addr := serve(t, &h2edge.Server{Handler: echo})
	conns := make([]*rawConn, n)
	for i := range conns {
		conns[i] = dialRaw(t, addr)
		conns[i].headers(1, true)
		conns[i].answer(1)
	}
	wantServerGoroutines(t, n)
	for _, c := range conns {
		if err := c.fr.WritePing(false, [8]byte{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		if p, ok := c.next().(*http2.PingFrame); !ok || !p.IsAck() || p.Data != [8]byte{1, 2, 3} {
			t.Fatalf("want the PING's ACK, read %v", p)
		}
	}
	wantServerGoroutines(t, n)
}

// wantServerGoroutines waits (at most 5 s) until exactly n goroutines run
// the server's code (h2edge's methods on their stacks), and fails with
// their stacks if they do not. Runners waiting for a job are the
// server's, not a connection's (runners.go), and are not counted.
func wantServerGoroutines(t *testing.T, n int) {
	t.Helper()
	var ours []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ours = ours[:0]
		for _, g := range testkit.Goroutines() {
			waiting := strings.Contains(g, "h2edge.(*runnerPool).runner") && !strings.Contains(g, ").work(")
			if strings.Contains(g, "proxy/h2edge.(*") && !waiting {
				ours = append(ours, g)
			}
		}
		if len(ours) == n || time.Now().After(deadline) {
			break
		}
	}
	if len(ours) != n {
		t.Fatalf("%d goroutines of the server, want %d:\n%s", len(ours), n, strings.Join(ours, "\n\n"))
	}
}

// A connection quiet for a second parks: its read loop's goroutine ends,
// and the one left waits on the socket without reading (park.go), on
// none of the read loop's frames; a request wakes it, and is answered.
func TestIdleConnParks(t *testing.T) {
	const n = 4
	addr := serve(t, &h2edge.Server{Handler: echo})
	conns := make([]*rawConn, n)
	for i := range conns {
		conns[i] = dialRaw(t, addr)
		conns[i].headers(1, true)
		conns[i].answer(1)
	}
	parked := func() int {
		k := 0
		for _, g := range testkit.Goroutines() {
			if strings.Contains(g, "h2edge.(*conn).serveParked") && !strings.Contains(g, "h2edge.(*conn).loop") &&
				strings.Contains(g, "net.(*rawConn).Read") {
				k++
			}
		}
		return k
	}
	deadline := time.Now().Add(5 * time.Second)
	for parked() != n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if k := parked(); k != n {
		t.Fatalf("%d of %d idle connections parked", k, n)
	}
	wantServerGoroutines(t, n)
	for _, c := range conns {
		c.headers(3, true)
		c.answer(3)
	}
}
