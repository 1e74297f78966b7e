package h2edge_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"tradergate/proxy/h2edge"
)

// What a client may do to pin the server's memory or make it work for
// nothing, one test per kind, each with the bound its defense sets: each
// fails when that defense is taken out.

// events records what a server tells its ConnClosed and StreamCut hooks.
type events struct {
	mu     sync.Mutex
	closed []string
	cut    map[string]int
}

func (e *events) hook(srv *h2edge.Server) *h2edge.Server {
	e.cut = map[string]int{}
	srv.ConnClosed = func(r string) {
		e.mu.Lock()
		e.closed = append(e.closed, r)
		e.mu.Unlock()
	}
	srv.StreamCut = func(r string) {
		e.mu.Lock()
		e.cut[r]++
		e.mu.Unlock()
	}
	return srv
}

// waitClosed waits for the first connection's close reason.
func (e *events) waitClosed(t *testing.T) string {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		e.mu.Lock()
		if len(e.closed) > 0 {
			r := e.closed[0]
			e.mu.Unlock()
			return r
		}
		e.mu.Unlock()
	}
	t.Fatalf("the connection is still open")
	return ""
}

func (e *events) cuts(reason string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cut[reason]
}

// goAway reads until the server's GOAWAY, within d; nil if the
// connection ended or d passed without one.
func (c *rawConn) goAway(d time.Duration) *http2.GoAwayFrame {
	c.nc.SetReadDeadline(time.Now().Add(d))
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return nil
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			return ga
		}
	}
}

// flood sends up to max frames with send(i), and after every batch a
// PING whose answer it waits for, so that the server has read all that
// was sent; it stops at the server's GOAWAY and returns how many frames
// the server had read by then (at most, the batch under way included)
// and the GOAWAY (nil if none came).
func (c *rawConn) flood(max, batch int, send func(i int) error) (int, *http2.GoAwayFrame) {
	c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	for i := 0; i < max; {
		for j := 0; j < batch && i < max; j++ {
			if err := send(i); err != nil {
				return i, c.goAway(5 * time.Second)
			}
			i++
		}
		mark := [8]byte{'m', byte(i >> 16), byte(i >> 8), byte(i)}
		if err := c.fr.WritePing(false, mark); err != nil {
			return i, c.goAway(5 * time.Second)
		}
		for {
			f, err := c.fr.ReadFrame()
			if err != nil {
				return i, nil
			}
			if ga, ok := f.(*http2.GoAwayFrame); ok {
				return i, ga
			}
			if p, ok := f.(*http2.PingFrame); ok && p.IsAck() && p.Data == mark {
				break
			}
		}
	}
	return max, c.goAway(time.Second)
}

// A request that never ends is reset after RequestTimeout and its
// fields dropped; the connection goes on.
func TestUnfinishedRequestIsReset(t *testing.T) {
	var ev events
	addr := serve(t, ev.hook(&h2edge.Server{Handler: echo, RequestTimeout: 200 * time.Millisecond}))
	c := dialRaw(t, addr)
	c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	c.headers(1, false, "x-pin", strings.Repeat("p", 1000))
	c.wantRST(1, http2.ErrCodeCancel)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("reset after %v, RequestTimeout 200ms", took)
	}
	if n := ev.cuts(h2edge.ReasonRequestTimeout); n != 1 {
		t.Errorf("request_timeout cuts: %d", n)
	}
	c.headers(3, true)
	if status, _, _ := c.answer(3); status != "200" {
		t.Errorf("status %s", status)
	}
}

// Unfinished requests hold at most MaxPendingHeaderBytes of header
// lists per connection: past it a request is answered at once (the
// handler sees TooLarge, without fields), and a client that keeps
// pushing is told ENHANCE_YOUR_CALM. The fields are sent as literals
// and, in the second case, as references to one large entry of HPACK's
// dynamic table (an HPACK bomb: a few bytes on the wire, a large list).
func TestPendingHeaderBudget(t *testing.T) {
	for _, bomb := range []bool{false, true} {
		name := map[bool]string{false: "literals", true: "hpack bomb"}[bomb]
		t.Run(name, func(t *testing.T) {
			var ev events
			var sawFields sync.Map
			srv := ev.hook(&h2edge.Server{
				MaxHeaderListSize:     64 << 10,
				MaxPendingHeaderBytes: 40 << 10,
				Handler: func(st *h2edge.Stream) {
					if st.TooLarge {
						sawFields.Store(st.ID(), len(st.Fields))
						st.Status(431)
					} else {
						st.Status(200)
					}
					st.Send(nil)
				},
			})
			c := dialRaw(t, serve(t, srv))
			value := strings.Repeat("v", 3000)
			var block bytes.Buffer
			enc := hpack.NewEncoder(&block)
			send := func(id uint32) error {
				block.Reset()
				for _, f := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", "edge"}, {":path", "/x"}} {
					enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
				}
				for range 3 { // about 9 KB of list
					if bomb {
						enc.WriteField(hpack.HeaderField{Name: "x-bomb", Value: value})
					} else {
						enc.WriteField(hpack.HeaderField{Name: "x-big", Value: value, Sensitive: true})
					}
				}
				return c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true})
			}
			// Four lists fit in 40 KiB; the fifth does not.
			for i := range 5 {
				if err := send(uint32(1 + 2*i)); err != nil {
					t.Fatal(err)
				}
			}
			if status, _, _ := c.answer(9); status != "431" {
				t.Fatalf("status %s, want 431 for the request past the budget", status)
			}
			c.wantRST(9, http2.ErrCodeNo) // its body is not wanted
			if n, _ := sawFields.Load(uint32(9)); n != 0 {
				t.Errorf("the handler saw %v fields past the budget", n)
			}
			// The first four are held, not answered: a PING's answer comes
			// next.
			if err := c.fr.WritePing(false, [8]byte{1}); err != nil {
				t.Fatal(err)
			}
			if p, ok := c.next().(*http2.PingFrame); !ok || !p.IsAck() {
				t.Fatalf("read %v, want the PING's answer", p)
			}
			// Pushing on: the connection is cut within the flood budget.
			n, ga := c.flood(2000, 20, func(i int) error { return send(uint32(11 + 2*i)) })
			if ga == nil || ga.ErrCode != http2.ErrCodeEnhanceYourCalm {
				t.Fatalf("after %d requests past the budget: GOAWAY %v, want ENHANCE_YOUR_CALM", n, ga)
			}
			if n > 400 {
				t.Errorf("cut after %d requests past the budget", n)
			}
			if r := ev.waitClosed(t); r != h2edge.ReasonHeaderBudget {
				t.Errorf("closed for %s", r)
			}
		})
	}
}

// SETTINGS frames do a bounded amount of work: more than 100
// parameters is a connection error, as in x/net's server; so is the
// 2,730-parameter frame that would walk every open stream 2,730 times.
// (A parameter given twice is allowed, RFC 9113 section 6.5.3: its last
// value counts, and the streams are walked once.)
func TestSettingsBounded(t *testing.T) {
	many := func(n int, id func(i int) http2.SettingID) []http2.Setting {
		s := make([]http2.Setting, n)
		for i := range s {
			s[i] = http2.Setting{ID: id(i), Val: uint32(1000 + i)}
		}
		return s
	}
	for name, settings := range map[string][]http2.Setting{
		"101 unknown parameters": many(101, func(i int) http2.SettingID { return http2.SettingID(0x100 + i) }),
		"2730 window sizes":      many(2730, func(int) http2.SettingID { return http2.SettingInitialWindowSize }),
	} {
		t.Run(name, func(t *testing.T) {
			var ev events
			release := make(chan struct{})
			addr := serve(t, ev.hook(&h2edge.Server{Handler: func(st *h2edge.Stream) {
				<-release
				st.Status(200)
				st.Send(nil)
			}}))
			defer close(release)
			c := dialRaw(t, addr)
			for id := uint32(1); id < 40; id += 2 {
				c.headers(id, true) // open streams for the window to walk
			}
			if err := c.fr.WriteSettings(settings...); err != nil {
				t.Fatal(err)
			}
			if ga := c.goAway(5 * time.Second); ga == nil || ga.ErrCode != http2.ErrCodeProtocol {
				t.Fatalf("GOAWAY %v, want PROTOCOL_ERROR", ga)
			}
			if r := ev.waitClosed(t); r != h2edge.ReasonProtocol {
				t.Errorf("closed for %s", r)
			}
		})
	}
}

// A client that reads large answers and gives their windows back after
// the streams ended (Go's client does, 4 KiB at a time) is not a flood,
// however much it was sent: what the closed streams were sent and had not
// given back is free to give back, and only what goes past it counts.
func TestWindowUpdatesAfterLargeAnswers(t *testing.T) {
	const streams, size, step = 8, 512 << 10, 4 << 10
	var ev events
	body := bytes.Repeat([]byte("x"), size)
	addr := serve(t, ev.hook(&h2edge.Server{Handler: func(st *h2edge.Stream) {
		st.Status(200)
		st.Send(body)
	}}))
	c := dialRaw(t, addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 4 << 20})
	if err := c.fr.WriteWindowUpdate(0, 1<<30); err != nil {
		t.Fatal(err)
	}
	for i := range streams {
		c.headers(uint32(1+2*i), true)
	}
	for ended := 0; ended < streams; {
		switch f := c.next().(type) {
		case *http2.MetaHeadersFrame:
		case *http2.DataFrame:
			if f.StreamEnded() {
				ended++
			}
		default:
			t.Fatalf("read %v", f)
		}
	}
	// All of it given back, 4 KiB at a time: 1,024 updates for 4 MiB.
	per := size / step
	if n, ga := c.flood(streams*per, 25, func(i int) error {
		return c.fr.WriteWindowUpdate(uint32(1+2*(i/per)), step)
	}); ga != nil {
		t.Fatalf("cut after %d window updates for closed streams: %v", n, ga)
	}
	// Past that, they count.
	n, ga := c.flood(5000, 25, func(int) error { return c.fr.WriteWindowUpdate(1, step) })
	if ga == nil || ga.ErrCode != http2.ErrCodeEnhanceYourCalm || n > 300 {
		t.Fatalf("after %d more: GOAWAY %v, want ENHANCE_YOUR_CALM within about 200", n, ga)
	}
	if r := ev.waitClosed(t); r != h2edge.ReasonFlood {
		t.Errorf("closed for %s", r)
	}
}

// A SETTINGS frame of 100 parameters, the bound, is taken: the
// connection goes on answering.
func TestSettingsAtTheBound(t *testing.T) {
	addr := serve(t, &h2edge.Server{Handler: echo})
	c := dialRaw(t, addr)
	s := make([]http2.Setting, 100)
	for i := range s {
		s[i] = http2.Setting{ID: http2.SettingID(0x100 + i), Val: uint32(i)}
	}
	if err := c.fr.WriteSettings(s...); err != nil {
		t.Fatal(err)
	}
	c.headers(1, true)
	if status, _, _ := c.answer(1); status != "200" {
		t.Errorf("status %q after 100 parameters", status)
	}
}

// The idle timeout counts streams and DATA only: a connection kept
// alive with PINGs is closed all the same, and so is one whose answer
// waits for a window the client never opens (a slow reader), PINGs or
// not.
func TestIdleTimeoutIgnoresPings(t *testing.T) {
	page := bytes.Repeat([]byte("z"), 100<<10)
	for _, slowRead := range []bool{false, true} {
		name := map[bool]string{false: "pings", true: "slow read"}[slowRead]
		t.Run(name, func(t *testing.T) {
			var ev events
			addr := serve(t, ev.hook(&h2edge.Server{IdleTimeout: 300 * time.Millisecond, Handler: func(st *h2edge.Stream) {
				st.Status(200)
				st.Send(page)
			}}))
			var c *rawConn
			if slowRead {
				c = dialRaw(t, addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
			} else {
				c = dialRaw(t, addr)
				if err := c.fr.WriteWindowUpdate(0, 1<<20); err != nil {
					t.Fatal(err)
				}
				if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}); err != nil {
					t.Fatal(err)
				}
			}
			c.headers(1, true)
			start := time.Now()
			done := make(chan *http2.GoAwayFrame, 1)
			go func() { done <- c.goAway(5 * time.Second) }()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case ga := <-done:
					if ga == nil || ga.ErrCode != http2.ErrCodeNo {
						t.Fatalf("GOAWAY %v, want NO_ERROR", ga)
					}
					if took := time.Since(start); took > 3*time.Second {
						t.Errorf("closed after %v; idle timeout 300ms", took)
					}
					if r := ev.waitClosed(t); r != h2edge.ReasonIdle {
						t.Errorf("closed for %s", r)
					}
					return
				case <-tick.C:
					c.fr.WritePing(false, [8]byte{byte(i)})
				}
			}
		})
	}
}

// Frames that do no work are counted against those that do; past the
// flood budget the connection is told ENHANCE_YOUR_CALM and closed.
func TestFloodsAreCut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reason string
		setup  func(c *rawConn)
		send   func(c *rawConn, i int) error
	}{
		{"PING", h2edge.ReasonFlood, nil, func(c *rawConn, i int) error { return c.fr.WritePing(false, [8]byte{byte(i)}) }},
		{"SETTINGS", h2edge.ReasonFlood, nil, func(c *rawConn, i int) error { return c.fr.WriteSettings() }},
		{"PRIORITY", h2edge.ReasonFlood, nil, func(c *rawConn, i int) error {
			return c.fr.WritePriority(3, http2.PriorityParam{StreamDep: 0, Weight: 1})
		}},
		{"unknown type", h2edge.ReasonFlood, nil, func(c *rawConn, i int) error { return c.fr.WriteRawFrame(0x42, 0, 0, nil) }},
		{"empty DATA", h2edge.ReasonFlood,
			func(c *rawConn) { c.headers(1, false, ":method", "POST") },
			func(c *rawConn, i int) error { return c.fr.WriteData(1, false, nil) }},
		{"WINDOW_UPDATE on a closed stream", h2edge.ReasonFlood,
			func(c *rawConn) { c.headers(1, true); c.answer(1) },
			func(c *rawConn, i int) error { return c.fr.WriteWindowUpdate(1, 1) }},
		{"WINDOW_UPDATE of 0", h2edge.ReasonFlood,
			func(c *rawConn) { c.fr.AllowIllegalWrites = true; c.headers(1, true); c.answer(1) },
			func(c *rawConn, i int) error { return c.fr.WriteWindowUpdate(1, 0) }},
		{"malformed requests", h2edge.ReasonFlood, nil,
			func(c *rawConn, i int) error { return c.tryHeaders(uint32(1+2*i), true, "connection", "close") }},
		{"rapid reset", h2edge.ReasonRapidReset, nil, func(c *rawConn, i int) error {
			if err := c.tryHeaders(uint32(1+2*i), true); err != nil {
				return err
			}
			return c.fr.WriteRSTStream(uint32(1+2*i), http2.ErrCodeCancel)
		}},
		{"rapid reset, slow handler", h2edge.ReasonRapidReset, nil, func(c *rawConn, i int) error {
			if err := c.tryHeaders(uint32(1+2*i), true, ":path", "/slow"); err != nil {
				return err
			}
			return c.fr.WriteRSTStream(uint32(1+2*i), http2.ErrCodeCancel)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev events
			addr := serve(t, ev.hook(&h2edge.Server{Handler: func(st *h2edge.Stream) {
				if st.Path == "/slow" {
					<-st.Context().Done()
				}
				echo(st)
			}}))
			c := dialRaw(t, addr)
			if tc.setup != nil {
				tc.setup(c)
			}
			n, ga := c.flood(5000, 25, func(i int) error { return tc.send(c, i) })
			if ga == nil || ga.ErrCode != http2.ErrCodeEnhanceYourCalm {
				t.Fatalf("after %d frames: GOAWAY %v, want ENHANCE_YOUR_CALM", n, ga)
			}
			// The budget is 200; the PINGs that pace the test count, and
			// a second that passes takes one off.
			if n > 300 {
				t.Errorf("cut after %d frames", n)
			}
			if r := ev.waitClosed(t); r != tc.reason {
				t.Errorf("closed for %s, want %s", r, tc.reason)
			}
		})
	}
}

// Answers earn credit: a client whose requests are answered may send a
// PING per request for ever.
func TestFloodBudgetSparesWorkingClients(t *testing.T) {
	addr := serve(t, &h2edge.Server{Handler: echo})
	c := dialRaw(t, addr)
	for i := range 600 {
		id := uint32(1 + 2*i)
		c.headers(id, true)
		c.answer(id)
		if err := c.fr.WritePing(false, [8]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if p, ok := c.next().(*http2.PingFrame); !ok || !p.IsAck() {
			t.Fatalf("request %d: read %v", i, p)
		}
	}
}

// A header block of empty CONTINUATION frames is cut: the framer would
// read it for as long as the client sends.
func TestEmptyContinuationFlood(t *testing.T) {
	var ev events
	addr := serve(t, ev.hook(&h2edge.Server{Handler: echo}))
	c := dialRaw(t, addr)
	c.buf.Reset()
	c.enc.WriteField(hpack.HeaderField{Name: ":method", Value: "GET"})
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.buf.Bytes()}); err != nil {
		t.Fatal(err)
	}
	sent := 0
	for ; sent < 100_000; sent++ {
		if err := c.fr.WriteContinuation(1, false, nil); err != nil {
			break
		}
	}
	if ga := c.goAway(5 * time.Second); ga == nil || ga.ErrCode != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("after %d empty CONTINUATION frames: GOAWAY %v, want ENHANCE_YOUR_CALM", sent, ga)
	}
	if r := ev.waitClosed(t); r != h2edge.ReasonFlood {
		t.Errorf("closed for %s", r)
	}
}

// A header block refused as malformed still uses its stream id (RFC 9113
// section 5.1.1): a later RST_STREAM or WINDOW_UPDATE on it concerns a
// closed stream and is no connection error.
func TestStreamIDAfterRejectedBlock(t *testing.T) {
	addr := serve(t, &h2edge.Server{Handler: echo})
	c := dialRaw(t, addr)
	c.buf.Reset()
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":path", "/x"}, {"X-Upper", "a"}} {
		c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.buf.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	c.wantRST(1, http2.ErrCodeProtocol)
	if err := c.fr.WriteWindowUpdate(1, 100); err != nil {
		t.Fatal(err)
	}
	if err := c.fr.WriteRSTStream(1, http2.ErrCodeCancel); err != nil {
		t.Fatal(err)
	}
	c.headers(3, true)
	if status, _, _ := c.answer(3); status != "200" {
		t.Errorf("status %s", status)
	}
}

// Shutdown with a request that never ends: the GOAWAY goes out, the
// stream whose handler runs is answered, the unfinished one is reset
// after RequestTimeout, and Shutdown returns then, not at its deadline.
func TestShutdownWithUnfinishedRequest(t *testing.T) {
	var ev events
	started, release := make(chan struct{}, 1), make(chan struct{})
	srv := ev.hook(&h2edge.Server{RequestTimeout: 300 * time.Millisecond, Handler: func(st *h2edge.Stream) {
		started <- struct{}{}
		<-release
		st.Status(200)
		st.Send([]byte("done"))
	}})
	c := dialRaw(t, serve(t, srv))
	c.headers(1, false)
	c.headers(3, true)
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- srv.Shutdown(ctx) }()
	c.wantGoAway(http2.ErrCodeNo)
	c.wantRST(1, http2.ErrCodeCancel)
	close(release)
	if status, _, body := c.answer(3); status != "200" || string(body) != "done" {
		t.Errorf("stream 3: %s %q", status, body)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Shutdown took %v", took)
	}
	if r := ev.waitClosed(t); r != h2edge.ReasonShutdown {
		t.Errorf("closed for %s", r)
	}
}

// A client that stops inside a frame is not waited for past the read
// deadline: the part read cannot be put back.
func TestStopInsideAFrame(t *testing.T) {
	var ev events
	addr := serve(t, ev.hook(&h2edge.Server{Handler: echo, IdleTimeout: 200 * time.Millisecond}))
	c := dialRaw(t, addr)
	// A PING's header and half its payload.
	if _, err := c.nc.Write([]byte{0, 0, 8, byte(http2.FramePing), 0, 0, 0, 0, 0, 1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if r := ev.waitClosed(t); r != h2edge.ReasonReadTimeout {
		t.Errorf("closed for %s", r)
	}
}

// A SETTINGS frame may give INITIAL_WINDOW_SIZE many times (up to 100
// parameters): the last value counts.
func TestSettingsLastWindowCounts(t *testing.T) {
	addr := serve(t, &h2edge.Server{Handler: func(st *h2edge.Stream) {
		st.Status(200)
		st.Send(bytes.Repeat([]byte("w"), 1000))
	}})
	c := dialRaw(t, addr)
	settings := make([]http2.Setting, 100)
	for i := range settings {
		settings[i] = http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(1<<20 + i)}
	}
	settings[99].Val = 7
	if err := c.fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	c.headers(1, true)
	if f, ok := c.next().(*http2.MetaHeadersFrame); !ok || f.PseudoValue("status") != "200" {
		t.Fatalf("read %v", f)
	}
	if d, ok := c.next().(*http2.DataFrame); !ok || len(d.Data()) != 7 {
		t.Fatalf("read %v, want 7 bytes of DATA", d)
	}
}

// A cut connection is logged with the client's address, at most once a
// second however many are cut.
func TestCutsAreLoggedOnceASecond(t *testing.T) {
	var buf lockedBuffer
	addr := serve(t, &h2edge.Server{Handler: echo, Log: slog.New(slog.NewTextHandler(&buf, nil))})
	for range 3 {
		c := dialRaw(t, addr)
		if _, ga := c.flood(1000, 50, func(i int) error { return c.fr.WritePing(false, [8]byte{byte(i)}) }); ga == nil {
			t.Fatal("no GOAWAY")
		}
		c.nc.Close()
	}
	time.Sleep(100 * time.Millisecond)
	if n := strings.Count(buf.String(), `msg="h2edge: connection cut" remote=127.0.0.1 reason=flood`); n != 1 {
		t.Errorf("%d log lines for 3 cuts within a second:\n%s", n, buf.String())
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
