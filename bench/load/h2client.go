package load

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2conn is one HTTP/2 client connection over TLS, minimal on purpose as
// conn is for HTTP/1.1: net/http's HTTP/2 client spends about as much per
// request as the server under test, which would make the load generator
// the bottleneck. It writes HEADERS frames (HPACK with a dynamic table,
// as browsers and h2load index repeated fields) and reads just enough of
// each answer to time it: its status, X-Cache when asked, and where its
// stream ends. Flow control is opened wide once, so that the server never
// waits for a window: every answer of a run fits in it.
type h2conn struct {
	nc net.Conn
	fr *http2.Framer
	bw *bufio.Writer

	// wmu guards the writing side: the framer's writes, the encoder, the
	// next stream id and the flush. The sender writes HEADERS, the reader
	// SETTINGS and PING acknowledgements and WINDOW_UPDATEs.
	wmu    sync.Mutex
	enc    *hpack.Encoder
	encBuf bytes.Buffer
	nextID uint32

	// mu guards streams, the requests in flight by stream id.
	mu      sync.Mutex
	streams map[uint32]*h2stream
	// slots bounds the streams in flight (Spec.Streams).
	slots chan struct{}
	// dead closes when the reader stops: the connection is gone.
	dead chan struct{}
	// unread counts DATA bytes received since the connection's window was
	// last given back.
	unread int64
}

// h2stream is one request in flight.
type h2stream struct {
	due       time.Time // open loop: when it was due; closed loop: sent
	sent      time.Time
	connWait  time.Duration // waiting for a free stream
	measuring bool          // open loop: due in the window
	sample    bool          // read X-Cache
	resp      response
}

// h2Window is the flow-control window the client grants, per stream and
// for the connection: far more than the answers in flight can hold.
const h2Window = 1 << 30

// dialH2 opens a TLS connection that negotiated h2 and sends the
// preface: settings (no push, the wide window) and the connection's
// window update.
func dialH2(addr string, tc *tls.Config, streams int) (*h2conn, error) {
	c0, err := dial(addr, tc)
	if err != nil {
		return nil, err
	}
	tlsConn, ok := c0.nc.(*tls.Conn)
	if !ok || tlsConn.ConnectionState().NegotiatedProtocol != "h2" {
		c0.close()
		return nil, errors.New("h2: the server did not negotiate h2 by ALPN")
	}
	c := &h2conn{
		nc: c0.nc, bw: bufio.NewWriterSize(c0.nc, 16<<10), nextID: 1,
		streams: map[uint32]*h2stream{}, slots: make(chan struct{}, streams), dead: make(chan struct{}),
	}
	c.fr = http2.NewFramer(c.bw, c0.br)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.enc = hpack.NewEncoder(&c.encBuf)
	_ = c.nc.SetDeadline(time.Time{})
	if _, err := c.bw.WriteString(http2.ClientPreface); err != nil {
		c.nc.Close()
		return nil, err
	}
	err = c.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: h2Window})
	if err == nil {
		err = c.fr.WriteWindowUpdate(0, h2Window-65535)
	}
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		c.nc.Close()
		return nil, err
	}
	return c, nil
}

// send writes one request as a HEADERS frame that ends its stream, the
// fields of headers after the pseudo-header fields.
func (c *h2conn) send(authority, target string, headers [][2]string, st *h2stream) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.encBuf.Reset()
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", authority}, {":path", target}} {
		_ = c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for _, f := range headers {
		_ = c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	id := c.nextID
	c.nextID += 2
	c.mu.Lock()
	c.streams[id] = st
	c.mu.Unlock()
	err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.encBuf.Bytes(), EndStream: true, EndHeaders: true})
	if err == nil {
		err = c.bw.Flush()
	}
	return err
}

// write runs f with the writing side held, and flushes.
func (c *h2conn) write(f func() error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := f(); err != nil {
		return err
	}
	return c.bw.Flush()
}

// readLoop reads frames until the connection fails or closes, calling
// done for every stream that ends (err set when it ended without an
// answer), then for every stream still in flight, and closes dead.
func (c *h2conn) readLoop(done func(st *h2stream, err error)) {
	defer close(c.dead)
	finish := func(id uint32, err error) {
		c.mu.Lock()
		st := c.streams[id]
		delete(c.streams, id)
		c.mu.Unlock()
		if st != nil {
			done(st, err)
			<-c.slots
		}
	}
	var err error
	for {
		var f http2.Frame
		if f, err = c.fr.ReadFrame(); err != nil {
			break
		}
		id := f.Header().StreamID
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			c.mu.Lock()
			st := c.streams[id]
			c.mu.Unlock()
			if st != nil {
				if code, err := strconv.Atoi(f.PseudoValue("status")); err == nil && code >= 200 {
					st.resp.status = code
				}
				if st.sample {
					st.resp.cache = firstField(f, "x-cache")
				}
			}
			if f.StreamEnded() {
				finish(id, nil)
			}
		case *http2.DataFrame:
			n := int64(len(f.Data()))
			c.mu.Lock()
			if st := c.streams[id]; st != nil {
				st.resp.body += n
			}
			c.mu.Unlock()
			// Give the connection's window back long before it runs out.
			if c.unread += int64(f.Length); c.unread > h2Window/2 {
				give := uint32(c.unread)
				c.unread = 0
				if err = c.write(func() error { return c.fr.WriteWindowUpdate(0, give) }); err != nil {
					break
				}
			}
			if f.StreamEnded() {
				finish(id, nil)
			}
		case *http2.RSTStreamFrame:
			finish(id, fmt.Errorf("h2: stream reset: %v", f.ErrCode))
		case *http2.SettingsFrame:
			if !f.IsAck() {
				err = c.write(func() error { return c.fr.WriteSettingsAck() })
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				err = c.write(func() error { return c.fr.WritePing(true, f.Data) })
			}
		case *http2.GoAwayFrame:
			// Streams above the last one the server will answer are
			// failed now; the rest are read to the end of the connection.
			c.mu.Lock()
			var gone []uint32
			for sid := range c.streams {
				if sid > f.LastStreamID {
					gone = append(gone, sid)
				}
			}
			c.mu.Unlock()
			for _, sid := range gone {
				finish(sid, fmt.Errorf("h2: GOAWAY %v", f.ErrCode))
			}
		}
		if err != nil {
			break
		}
	}
	c.nc.Close()
	c.mu.Lock()
	ids := make([]uint32, 0, len(c.streams))
	for id := range c.streams {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		finish(id, fmt.Errorf("h2: connection ended: %w", err))
	}
}

func firstField(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.RegularFields() {
		if hf.Name == name {
			return hf.Value
		}
	}
	return ""
}

// h2Fields turns "Name: value" headers into HTTP/2 fields: lower-case
// names, and none of the connection-specific fields HTTP/2 forbids
// (RFC 9113, section 8.2.2).
func h2Fields(headers []string) [][2]string {
	var out [][2]string
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok {
			continue
		}
		name = strings.ToLower(strings.TrimSpace(name))
		switch name {
		case "host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
			continue
		}
		out = append(out, [2]string{name, strings.TrimSpace(value)})
	}
	return out
}

// h2worker is one HTTP/2 connection of a timed run: a sender and the
// connection's reader. The reader owns the answers' tallies; the sender
// owns its openTally.
type h2worker struct {
	spec    *Spec
	tc      *tls.Config
	fields  [][2]string
	pick    *targetPicker
	c       *h2conn
	hist    Histogram
	served  Histogram // open loop: servedLatency
	status  [600]int64
	stats   tally
	kept    []openAnswer
	n       int
	phase   *atomic.Int32 // closed loop
	win     window        // open loop
	open    bool
	readers sync.WaitGroup
}

// done records a finished stream; it runs on the reader.
func (w *h2worker) done(st *h2stream, err error) {
	now := time.Now()
	measuring := st.measuring
	if !w.open {
		measuring = w.phase.Load() == phaseMeasure
	}
	if !measuring {
		return
	}
	if err != nil || st.resp.status == 0 {
		w.stats.errors++
		w.stats.transport++
		return
	}
	d := now.Sub(st.due)
	w.stats.requests++
	w.hist.Record(d)
	if w.open {
		w.served.Record(servedLatency(d, st.sent.Sub(st.due), st.connWait))
	}
	w.stats.body += st.resp.body
	if st.resp.status < len(w.status) {
		w.status[st.resp.status]++
	}
	if st.resp.status < 200 || st.resp.status > 299 {
		w.stats.errors++
	}
	if st.sample {
		if w.stats.cache == nil {
			w.stats.cache = map[string]int64{}
		}
		w.stats.cache[st.resp.cache]++
		w.stats.cacheSampled++
		if w.spec.CheckCache != "" && st.resp.cache != w.spec.CheckCache {
			w.stats.cacheUnexpected++
		}
	}
	if w.open && w.spec.KeepAnswers {
		w.kept = append(w.kept, openAnswer{st.due.Sub(w.win.from).Microseconds(), d.Microseconds(), st.sent.Sub(st.due).Microseconds(), st.connWait.Microseconds()})
	}
}

// connect opens the worker's connection and starts its reader.
func (w *h2worker) connect() error {
	c, err := dialH2(w.spec.Addr, w.tc, w.spec.Streams)
	if err != nil {
		return err
	}
	w.c = c
	w.readers.Go(func() { c.readLoop(w.done) })
	return nil
}

// acquire waits for a free stream on the connection, redialling a
// connection that died; false when the run must stop (ctx, or until).
func (w *h2worker) acquire(ctx context.Context, until time.Time) bool {
	for {
		if w.c == nil {
			if time.Now().After(until) || ctx.Err() != nil {
				return false
			}
			if err := w.connect(); err != nil {
				time.Sleep(10 * time.Millisecond) // a server that refuses must not spin the CPU
				continue
			}
		}
		timer := time.NewTimer(time.Until(until))
		select {
		case w.c.slots <- struct{}{}:
			timer.Stop()
			return true
		case <-w.c.dead:
			timer.Stop()
			w.c = nil
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C:
			return false
		}
	}
}

// issue sends the next request as st. A failed write ends the
// connection, whose reader fails what was in flight; this request, if
// the reader has not taken it, is counted here.
func (w *h2worker) issue(st *h2stream, t *openTally) {
	req := w.pick.next()
	w.n++
	st.sample = (w.spec.CheckCache != "" || w.spec.SampleCache) && w.n%w.spec.SampleEvery == 0
	c := w.c
	st.sent = time.Now()
	if err := c.send(w.spec.Addr, req, w.fields, st); err != nil {
		c.nc.Close()
		c.mu.Lock()
		_, mine := c.streams[c.nextID-2]
		delete(c.streams, c.nextID-2)
		c.mu.Unlock()
		if mine {
			<-c.slots
			if st.measuring || (!w.open && w.phase.Load() == phaseMeasure) {
				t.sendErrors++
			}
		}
	}
}

// targetPicker walks request targets in turn, as listPicker walks whole
// HTTP/1.1 requests.
type targetPicker struct {
	targets []string
	i       int
}

func (p *targetPicker) next() string {
	t := p.targets[p.i]
	p.i = (p.i + 1) % len(p.targets)
	return t
}

// close ends the connection once its streams are answered (or the
// drain ends), and waits for its reader.
func (w *h2worker) close(until time.Time) {
	if w.c != nil {
		for len(w.c.slots) > 0 && time.Now().Before(until) {
			select {
			case <-w.c.dead:
			case <-time.After(time.Millisecond):
			}
		}
		w.c.nc.Close()
	}
	w.readers.Wait()
}

// runOpen sends connection k's share of the schedule.
func (w *h2worker) runOpen(ctx context.Context, sch schedule, k int, t *openTally) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	defer func() { w.close(w.win.drain) }()
	for i := int64(0); ctx.Err() == nil; i++ {
		due := sch.due(k, i)
		if !due.Before(w.win.to) {
			return
		}
		measuring := !due.Before(w.win.from)
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
			if measuring && (w.c == nil || len(w.c.slots) < cap(w.c.slots)) {
				t.lag.Record(time.Since(due))
			}
		}
		asked := time.Now()
		if !w.acquire(ctx, w.win.drain) {
			t.unsent += unsentFrom(sch, k, i, w.win)
			return
		}
		w.issue(&h2stream{due: due, measuring: measuring, connWait: time.Since(asked.Add(max(due.Sub(asked), 0)))}, t)
	}
}

// runClosed keeps every stream of the connection busy until the run's
// phase is done: each answer frees a stream for the next request.
func (w *h2worker) runClosed(ctx context.Context, t *openTally) {
	defer func() { w.close(time.Now().Add(w.spec.Timeout)) }()
	for w.phase.Load() != phaseDone && ctx.Err() == nil {
		if !w.acquire(ctx, time.Now().Add(w.spec.Timeout)) {
			return
		}
		w.issue(&h2stream{due: time.Now()}, t)
	}
}

// runH2 runs a ModeList run over HTTP/2: Connections connections of up
// to Streams requests in flight each, closed loop, or open loop with
// Rate (each connection its share of the schedule).
func runH2(ctx context.Context, s *Spec) (*Result, error) {
	tc, err := clientTLS(s.TLS)
	if err != nil {
		return nil, err
	}
	var phase atomic.Int32
	fields := h2Fields(s.Headers)
	workers := make([]*h2worker, s.Connections)
	for i := range workers {
		w := &h2worker{spec: s, tc: tc, fields: fields, pick: &targetPicker{targets: s.URLs, i: i * len(s.URLs) / len(workers) % len(s.URLs)}, phase: &phase, open: s.Rate > 0}
		if err := w.connect(); err != nil {
			for _, w := range workers[:i] {
				w.close(time.Now())
			}
			return nil, fmt.Errorf("dial %s: %w", s.Addr, err)
		}
		workers[i] = w
	}
	var res *Result
	var wg sync.WaitGroup
	tallies := make([]openTally, len(workers))
	var win window
	if s.Rate > 0 {
		var sch schedule
		sch, win = openPlan(s, time.Now())
		for k, w := range workers {
			w.win = win
			wg.Go(func() { w.runOpen(ctx, sch, k, &tallies[k]) })
		}
		if res, err = measureOpen(ctx, s, win, wg.Wait); err != nil {
			return nil, err
		}
	} else {
		for k, w := range workers {
			wg.Go(func() { w.runClosed(ctx, &tallies[k]) })
		}
		p := newProbe(s)
		sleepFor(ctx, s.Warmup)
		before := p.read(ctx)
		phase.Store(phaseMeasure)
		t0 := time.Now()
		sleepFor(ctx, s.Duration)
		phase.Store(phaseDone)
		res = &Result{Window: time.Since(t0), WindowStart: t0}
		after := p.read(ctx)
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p.fill(res, before, after)
	}
	res.Protocol = "h2"
	var h, served Histogram
	answers := make([][]openAnswer, len(workers))
	res.Status = map[int]int64{}
	for k, w := range workers {
		h.Merge(&w.hist)
		served.Merge(&w.served)
		w.stats.addTo(res, w.status[:])
		res.Unsent += tallies[k].unsent
		res.Errors += tallies[k].sendErrors
		res.TransportErrors += tallies[k].sendErrors
		answers[k] = w.kept
	}
	finishOpen(res, s, &h, tallies, answers, win)
	if s.Rate <= 0 {
		res.Lag = Latency{}
	} else {
		res.Served = summarize(&served)
	}
	return res, nil
}

// sleepFor sleeps for d, or until ctx ends.
func sleepFor(ctx context.Context, d time.Duration) {
	sleepUntil(ctx, time.Now().Add(d))
}
