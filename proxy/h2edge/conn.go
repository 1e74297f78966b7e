package h2edge

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

const (
	errCodeNo           = http2.ErrCodeNo
	errCodeProtocol     = http2.ErrCodeProtocol
	errCodeInternal     = http2.ErrCodeInternal
	errCodeFlowControl  = http2.ErrCodeFlowControl
	errCodeStreamClosed = http2.ErrCodeStreamClosed
	errCodeFrameSize    = http2.ErrCodeFrameSize
	errCodeRefused      = http2.ErrCodeRefusedStream
	errCodeCancel       = http2.ErrCodeCancel
	errCodeCalm         = http2.ErrCodeEnhanceYourCalm
	errCodeCompression  = http2.ErrCodeCompression

	// initialWindow is the protocol's initial flow-control window, for
	// both directions (RFC 9113 section 6.9.2); the edge keeps it for
	// what it receives.
	initialWindow = 65535
	// maxWindow is the largest a flow-control window may grow.
	maxWindow = 1<<31 - 1
	// defaultFrameSize is SETTINGS_MAX_FRAME_SIZE's initial value; the
	// edge reads no larger frames (a request is a header block).
	defaultFrameSize = 16384
	// goAwayLinger is how long a connection being closed after a GOAWAY
	// still reads (and drops) what the client sends, so that the client
	// reads the GOAWAY rather than a TCP reset.
	goAwayLinger = time.Second
	// goAwayLingerBytes bounds what it reads meanwhile: at loopback
	// speed a second is gigabytes, each decrypted under TLS.
	goAwayLingerBytes = 1 << 20
	// maxSettings is the most parameters a SETTINGS frame may carry, as
	// x/net's server allows: there are seven, and each costs work.
	maxSettings = 100
)

// conn is one HTTP/2 connection. Its read loop (serve) is the only reader
// of the connection; everything else, the streams, the flow-control
// windows and the write buffer, is under mu, taken by the read loop per
// frame and by a handler to frame its answer.
type conn struct {
	srv  *Server
	nc   net.Conn
	peer netip.Addr
	rd   reader // reader.go
	// sock is the connection's socket, under TLS if any, which a parked
	// connection waits on (park.go); nil: the read loop does not park.
	sock syscall.RawConn
	fr   *http2.Framer
	dec  *hpack.Decoder
	hb   headerBlock // the read loop's: decodes header blocks with dec

	// The read loop's own: when the connection counts as idle (no stream
	// opened or ended, no DATA, since), the read deadline last set, and
	// how many of the reader's empty CONTINUATION frames were counted.
	idle      time.Duration
	idleAt    time.Time
	deadline  time.Time
	emptySeen int
	// parking: the deadline set is the park deadline (park.go), before
	// the connection's own.
	parking bool
	// resumed is when the read loop last started again after parking.
	resumed time.Time

	// quitting is set before the read loop is woken to end (Shutdown, the
	// last stream of a draining connection): see wake.
	quitting atomic.Bool

	mu sync.Mutex
	w  writer // write.go

	streams     map[uint32]*Stream
	maxID       uint32 // the highest stream id the client opened
	handlers    int    // handler goroutines that have not returned
	sawSettings bool
	unacked     int // our SETTINGS frames the client has not acknowledged
	// goneAway: a GOAWAY was sent; streams above goAwayID are ignored.
	goneAway bool
	goAwayID uint32
	closed   bool // the read loop ended: answers are dropped

	// active: a stream was opened or ended, DATA came or went, since the
	// read loop last looked; PING, SETTINGS and the like do not count.
	active bool
	// pending are the streams whose request has not ended and whose
	// handler has not started, oldest first (some may have left since:
	// st.pending says); npending and pendingBytes are those still there
	// and the header bytes they hold (HPACK's measure).
	pending      []*Stream
	npending     int
	pendingBytes int
	// flood scores the frames that do no work against those that do
	// (flood.go); reason is why the connection ends, once known.
	flood   int
	floodAt time.Time // when flood was last refilled
	// spent is the score added since it was last at or below zero, by
	// spendReasons: a cut names the largest.
	spent [len(spendReasons)]int
	// closedWindow is what the client may still give back, by
	// WINDOW_UPDATEs for streams already closed, without spending the
	// flood budget: what those streams were sent and had not been given
	// back when they closed (flood.go).
	closedWindow int64
	reason       string

	// The send side, set by the client's SETTINGS and WINDOW_UPDATEs.
	sendWindow     int64 // the connection's window for DATA
	initialWindow  int64 // SETTINGS_INITIAL_WINDOW_SIZE: a new stream's window
	maxFrame       int   // SETTINGS_MAX_FRAME_SIZE
	tableMax       uint32
	tableSizeDirty bool      // tableMax must be signalled (hpack size update)
	sending        []*Stream // streams with DATA to send and window left
	// sendingArr holds sending while it is short (an answer or two at a
	// time, the common case), so that putting a stream in line does not
	// allocate.
	sendingArr [2]*Stream

	// recvWindow is what the client may still send on the connection.
	recvWindow int64
	// open counts the answers that stay open (open.go): a connection
	// holding one is not idle.
	open int
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{
		srv:           s,
		nc:            nc,
		streams:       map[uint32]*Stream{},
		sendWindow:    initialWindow,
		initialWindow: initialWindow,
		maxFrame:      defaultFrameSize,
		tableMax:      4096,
		recvWindow:    initialWindow,
	}
	if ap, err := netip.ParseAddrPort(nc.RemoteAddr().String()); err == nil {
		c.peer = ap.Addr().Unmap()
	}
	c.sending = c.sendingArr[:0]
	c.rd.nc = nc
	c.sock = socketOf(nc)
	c.dec = hpack.NewDecoder(4096, nil)
	c.hb.init(c.dec, c.srv.maxHeaderList())
	c.newFramer()
	return c
}

// newFramer gives the connection a framer. A framer keeps a read buffer
// as large as the largest frame it has read, so a connection that read
// large frames gets a new one once it is quiet (the HPACK state is the
// decoder's, kept).
func (c *conn) newFramer() {
	c.fr = http2.NewFramer(io.Discard, &c.rd)
	c.fr.SetMaxReadFrameSize(defaultFrameSize)
	c.fr.SetReuseFrames()
}

// serve is the connection's read loop. With the socket at hand (park.go)
// it runs on goroutines that end once the connection has been quiet for
// parkAfter, while serve's own goroutine, which never runs deeper than
// the wait between them, waits for the socket to become readable.
func (c *conn) serve() error {
	c.w.init(c)
	defer c.teardown()
	if c.sock == nil {
		_, err := c.loop(true, nil)
		return err
	}
	return c.serveParked()
}

// start writes the server's SETTINGS and reads the client's preface.
func (c *conn) start() error {
	c.mu.Lock()
	c.writeSettingsLocked()
	c.mu.Unlock()

	c.nc.SetReadDeadline(time.Now().Add(orDefault(c.srv.PrefaceTimeout, defaultPrefaceTimeout)))
	var preface [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(&c.rd, preface[:]); err != nil {
		c.setReason(ReasonClient)
		return err
	}
	if string(preface[:]) != http2.ClientPreface {
		c.setReason(ReasonProtocol)
		return errors.New("h2edge: bad client preface")
	}
	c.rd.scanning = true
	c.idle = orDefault(c.srv.IdleTimeout, defaultIdleTimeout)
	c.idleAt = time.Now().Add(c.idle)
	return nil
}

// loop reads and processes frames, from the connection's start when first
// is set, after handling werr (what the wait before it ended with) if any;
// it returns when the connection ends, or with park set once the
// connection has been quiet for parkAfter (park.go).
func (c *conn) loop(first bool, werr error) (park bool, _ error) {
	if first {
		if err := c.start(); err != nil {
			return false, err
		}
	}
	if c.fr == nil { // dropped as the loop parked
		c.newFramer()
	}
	if werr != nil {
		if done, rerr := c.failed(werr); done {
			return false, rerr
		}
	}
	for {
		if !c.rd.whole() {
			c.between()
		}
		if c.quitting.Load() && c.quiet() {
			return false, nil
		}
		var f http2.Frame
		err := c.rd.wait()
		if err == nil {
			f, err = c.fr.ReadFrame()
		}
		if hf, ok := f.(*http2.HeadersFrame); ok && err == nil {
			err = c.hb.read(c.fr, hf) // and the CONTINUATION frames after it
		}
		if err == nil {
			c.mu.Lock()
			if c.rd.empty > c.emptySeen {
				err = c.uselessLocked(c.rd.empty-c.emptySeen, ReasonFlood)
				c.emptySeen = c.rd.empty
			}
			if err == nil {
				err = c.process(f)
			}
			c.mu.Unlock()
		}
		if err == nil {
			continue
		}
		if c.parkNow(err) {
			return true, nil
		}
		if done, rerr := c.failed(err); done {
			return false, rerr
		}
	}
}

// between runs before a frame is read that may need a read from the
// connection (a frame not wholly buffered, in parts or not begun): it
// sets the read deadline (the connection's idle time or the oldest
// unfinished request's, whichever is first), and lets a quiet
// connection's large framer buffer go.
func (c *conn) between() {
	c.mu.Lock()
	if c.active {
		c.active = false
		c.idleAt = time.Now().Add(c.idle)
	}
	d := c.dueLocked()
	quiet := c.quietLocked()
	c.mu.Unlock()
	c.parking = false
	if c.sock != nil {
		// The park deadline comes first unless the connection's own does.
		if p := c.parkDeadline(); p.Before(d) {
			d, c.parking = p, true
		}
	}
	if !d.Equal(c.deadline) {
		c.deadline = d
		c.nc.SetReadDeadline(d)
	}
	if quiet && c.rd.maxLen > keptFrame {
		c.rd.maxLen = 0
		c.newFramer()
	}
}

// dueLocked is the connection's read deadline: its idle time or the
// oldest unfinished request's, whichever is first.
func (c *conn) dueLocked() time.Time {
	d := c.idleAt
	if st := c.oldestPendingLocked(); st != nil {
		if due := st.pendingAt.Add(c.srv.requestTimeout()); due.Before(d) {
			d = due
		}
	}
	return d
}

// failed handles an error of the read loop: a stream error resets that
// stream, a connection error sends GOAWAY and ends the connection, and an
// idle or draining connection ends once nothing is in progress.
func (c *conn) failed(err error) (done bool, _ error) {
	var se http2.StreamError
	var ce http2.ConnectionError
	var calm calmError
	var ne net.Error
	switch {
	case errors.As(err, &se):
		c.mu.Lock()
		// A header block refused as malformed still used its stream id
		// (RFC 9113 section 5.1.1): later frames on it are about a
		// closed stream, not an idle one.
		if c.rd.headers && se.StreamID == c.rd.blockID && se.StreamID%2 == 1 && se.StreamID > c.maxID {
			c.maxID = se.StreamID
		}
		c.resetLocked(se.StreamID, se.Code)
		ferr := c.uselessLocked(1, ReasonFlood)
		c.mu.Unlock()
		if ferr != nil {
			return c.failed(ferr)
		}
		return false, nil
	case errors.As(err, &calm):
		c.setReason(calm.reason)
		c.srv.logCut(c.peer, calm.reason)
		c.goAway(errCodeCalm)
		c.linger()
		return true, err
	case errors.Is(err, errEmptyContinuations):
		c.setReason(ReasonFlood)
		c.srv.logCut(c.peer, ReasonFlood)
		c.goAway(errCodeCalm)
		c.linger()
		return true, err
	case errors.As(err, &ce):
		c.setReason(ReasonProtocol)
		c.goAway(http2.ErrCode(ce))
		c.linger()
		return true, err
	case errors.Is(err, io.ErrUnexpectedEOF) && c.rd.nh == 0 && c.rd.skip == 0:
		// The frame was read whole, and is too short for what its flags
		// say it holds (a priority, a pad length): x/net's framer reports
		// that as the end of the input; it is a frame size error (RFC
		// 9113 section 4.2).
		c.setReason(ReasonProtocol)
		c.goAway(errCodeFrameSize)
		c.linger()
		return true, err
	case errors.Is(err, http2.ErrFrameTooLarge):
		c.setReason(ReasonProtocol)
		c.goAway(errCodeFrameSize)
		c.linger()
		return true, err
	case errors.As(err, &ne) && ne.Timeout():
		c.deadline = time.Time{} // set again, whatever it is
		if c.rd.midFrame() {
			// The client stopped inside a frame or a header block: what
			// was read of it cannot be put back.
			c.setReason(ReasonReadTimeout)
			return true, nil
		}
		if c.quitting.Load() && c.quiet() {
			return true, nil
		}
		c.mu.Lock()
		idle := c.expireLocked(time.Now())
		c.mu.Unlock()
		if !idle {
			return false, nil
		}
		c.setReason(ReasonIdle)
		c.goAway(errCodeNo)
		return true, nil
	}
	if c.srv.closed() {
		c.setReason(ReasonShutdown)
	}
	c.setReason(ReasonClient)
	return true, err
}

// expireLocked resets the streams whose request has not ended in time,
// and reports whether the connection is idle: no request unfinished, no
// answer being made or sent, and nothing else for the idle timeout.
func (c *conn) expireLocked(now time.Time) (idle bool) {
	limit := c.srv.requestTimeout()
	for st := c.oldestPendingLocked(); st != nil && !now.Before(st.pendingAt.Add(limit)); st = c.oldestPendingLocked() {
		c.resetLocked(st.id, errCodeCancel)
		c.srv.streamCut(ReasonRequestTimeout)
	}
	if c.active || now.Before(c.idleAt) || c.npending > 0 {
		return false
	}
	if c.handlers > 0 || c.open > 0 || len(c.sending) > 0 || c.w.pending() {
		c.active = true // a slow answer is not idleness
		return false
	}
	return true
}

// oldestPendingLocked is the oldest stream whose request has not ended
// and whose handler has not started, or nil.
func (c *conn) oldestPendingLocked() *Stream {
	for len(c.pending) > 0 {
		if st := c.pending[0]; st.pending {
			return st
		}
		c.pending[0] = nil
		c.pending = c.pending[1:]
	}
	c.pending = nil
	return nil
}

// addPendingLocked: st's request has begun without ending; its header
// list, size bytes, is held until it ends or it is reset.
func (c *conn) addPendingLocked(st *Stream, size int) {
	st.pending, st.pendingAt, st.headerBytes = true, time.Now(), size
	c.npending++
	c.pendingBytes += size
	if len(c.pending) >= 2*c.npending+32 {
		// Most of the line has left: keep it as short as what is in it.
		kept := c.pending[:0]
		for _, p := range c.pending {
			if p.pending {
				kept = append(kept, p)
			}
		}
		clear(c.pending[len(kept):])
		c.pending = kept
	}
	c.pending = append(c.pending, st)
}

// unpendLocked: st's handler starts, or st closes.
func (c *conn) unpendLocked(st *Stream) {
	if st.pending {
		st.pending = false
		c.npending--
		c.pendingBytes -= st.headerBytes
	}
}

// process handles one frame, under mu. A returned StreamError or
// ConnectionError is handled by failed.
func (c *conn) process(f http2.Frame) error {
	if c.closed {
		return net.ErrClosed
	}
	if !c.sawSettings {
		if _, ok := f.(*http2.SettingsFrame); !ok {
			return http2.ConnectionError(errCodeProtocol)
		}
		c.sawSettings = true
	}
	if c.goneAway && f.Header().StreamID > c.goAwayID {
		// A stream the client opened after our GOAWAY is not served;
		// its DATA still counts against the connection's window.
		if d, ok := f.(*http2.DataFrame); ok {
			return c.takeConnFlow(d)
		}
		return nil
	}
	switch f := f.(type) {
	case *http2.SettingsFrame:
		return c.processSettings(f)
	case *http2.HeadersFrame:
		return c.processHeaders(f)
	case *http2.DataFrame:
		return c.processData(f)
	case *http2.WindowUpdateFrame:
		return c.processWindowUpdate(f)
	case *http2.PingFrame:
		if !f.IsAck() {
			c.w.ping(f.Data)
		}
		return c.uselessLocked(1, ReasonFlood)
	case *http2.RSTStreamFrame:
		state, st := c.state(f.StreamID)
		if state == stateIdle {
			return http2.ConnectionError(errCodeProtocol)
		}
		// A stream reset before its answer was sent cost the server work
		// for nothing; one reset after takes the answer's credit back.
		cost := 2
		if st != nil {
			cost = 1
			c.closeStreamLocked(st)
		}
		return c.uselessLocked(cost, ReasonRapidReset)
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			return http2.StreamError{StreamID: f.StreamID, Code: errCodeProtocol}
		}
		// Priorities are not followed (RFC 9113 section 5.3.2).
		return c.uselessLocked(1, ReasonFlood)
	case *http2.GoAwayFrame:
		c.setReasonLocked(ReasonClient)
		c.goAwayLocked(errCodeNo)
		return nil
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(errCodeProtocol)
	}
	// Unknown frame types are ignored (RFC 9113 section 5.5).
	return c.uselessLocked(1, ReasonFlood)
}

type streamState uint8

const (
	stateIdle streamState = iota
	stateOpen
	stateHalfClosedRemote // the request is complete; the answer is not
	stateClosed
)

// state is a stream id's state (RFC 9113 section 5.1), and the stream
// if it is open.
func (c *conn) state(id uint32) (streamState, *Stream) {
	if st, ok := c.streams[id]; ok {
		return st.state, st
	}
	if id%2 == 1 && id <= c.maxID {
		return stateClosed, nil
	}
	return stateIdle, nil
}

func (c *conn) processSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		c.unacked--
		if c.unacked < 0 {
			return http2.ConnectionError(errCodeProtocol)
		}
		return nil
	}
	// A frame's work is bounded: at most maxSettings parameters, as
	// x/net's server allows, and INITIAL_WINDOW_SIZE, which walks the
	// open streams, walks them once per frame however often it is given.
	// A parameter given twice takes its last value (RFC 9113 section
	// 6.5.3), so only the last window size is applied; the largest is
	// the one that could have overflowed a window on the way.
	if f.NumSettings() > maxSettings {
		return http2.ConnectionError(errCodeProtocol)
	}
	window, largest := int64(-1), int64(-1)
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingHeaderTableSize:
			if s.Val < c.tableMax {
				c.tableMax = s.Val
				c.tableSizeDirty = true
			}
		case http2.SettingInitialWindowSize:
			window = int64(s.Val)
			largest = max(largest, window)
		case http2.SettingMaxFrameSize:
			c.maxFrame = int(s.Val)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if window >= 0 && (window != c.initialWindow || largest != window) {
		delta, peak := window-c.initialWindow, largest-c.initialWindow
		c.initialWindow = window
		for _, st := range c.streams {
			if st.sendWindow+peak > maxWindow {
				return http2.ConnectionError(errCodeFlowControl)
			}
			st.sendWindow += delta
			if delta > 0 {
				c.wantSendLocked(st)
			}
		}
	}
	c.w.settingsAck()
	c.pumpLocked()
	return c.uselessLocked(1, ReasonFlood)
}

func (c *conn) processWindowUpdate(f *http2.WindowUpdateFrame) error {
	if f.StreamID == 0 {
		c.sendWindow += int64(f.Increment)
		if c.sendWindow > maxWindow {
			return http2.ConnectionError(errCodeFlowControl)
		}
		c.pumpLocked()
		return nil
	}
	state, st := c.state(f.StreamID)
	if state == stateIdle {
		return http2.ConnectionError(errCodeProtocol)
	}
	if st == nil { // a closed stream's
		if cost := max(int64(f.Increment), closedWindowMin); c.closedWindow >= cost {
			c.closedWindow -= cost // the client reading an answer it had
			return nil
		}
		return c.uselessLocked(1, ReasonFlood)
	}
	st.sendWindow += int64(f.Increment)
	if st.sendWindow > maxWindow {
		return http2.StreamError{StreamID: f.StreamID, Code: errCodeFlowControl}
	}
	c.wantSendLocked(st)
	c.pumpLocked()
	return nil
}

// connHeaders are fields that only mean something to one HTTP/1.x hop; an
// HTTP/2 request carrying one is malformed (RFC 9113 section 8.2.2).
var connHeaders = map[string]bool{
	"connection": true, "keep-alive": true, "proxy-connection": true,
	"transfer-encoding": true, "upgrade": true,
}

// processHeaders handles a header block, as c.hb decoded it.
func (c *conn) processHeaders(f *http2.HeadersFrame) error {
	defer c.hb.release()
	b := &c.hb
	id := f.StreamID
	if id%2 != 1 {
		return http2.ConnectionError(errCodeProtocol)
	}
	if st := c.streams[id]; st != nil {
		// Trailers: they end the request, carry no pseudo-fields, and are
		// not read.
		if st.state == stateHalfClosedRemote {
			return http2.StreamError{StreamID: id, Code: errCodeStreamClosed}
		}
		if !f.StreamEnded() || len(b.pseudo()) > 0 {
			return http2.StreamError{StreamID: id, Code: errCodeProtocol}
		}
		return c.endRequestLocked(st)
	}
	if id <= c.maxID {
		return http2.ConnectionError(errCodeProtocol)
	}
	c.maxID = id
	c.active = true
	if uint32(len(c.streams)) >= c.srv.maxStreams() || uint32(c.handlers) >= c.srv.maxStreams() {
		if c.unacked == 0 {
			return http2.StreamError{StreamID: id, Code: errCodeProtocol}
		}
		return http2.StreamError{StreamID: id, Code: errCodeRefused}
	}
	if f.HasPriority() && f.Priority.StreamDep == id {
		return http2.StreamError{StreamID: id, Code: errCodeProtocol}
	}
	st := &Stream{
		c:          c,
		id:         id,
		state:      stateOpen,
		declared:   -1,
		recvWindow: initialWindow,
		sendWindow: c.initialWindow,
		Method:     b.pseudoValue(":method"),
		Scheme:     b.pseudoValue(":scheme"),
		Authority:  b.pseudoValue(":authority"),
		Path:       b.pseudoValue(":path"),
		TooLarge:   b.truncated,
		Peer:       c.peer,
	}
	if b.pseudoValue(":protocol") != "" || b.pseudoValue(":status") != "" {
		return http2.StreamError{StreamID: id, Code: errCodeProtocol}
	}
	if st.Method == "CONNECT" {
		if st.Path != "" || st.Scheme != "" || st.Authority == "" {
			return http2.StreamError{StreamID: id, Code: errCodeProtocol}
		}
	} else if st.Method == "" || st.Path == "" || (st.Scheme != "https" && st.Scheme != "http") {
		return http2.StreamError{StreamID: id, Code: errCodeProtocol}
	}
	st.Fields = b.regular()
	for _, hf := range st.Fields {
		switch {
		case connHeaders[hf.Name]:
			return http2.StreamError{StreamID: id, Code: errCodeProtocol}
		case hf.Name == "te" && hf.Value != "trailers":
			return http2.StreamError{StreamID: id, Code: errCodeProtocol}
		case hf.Name == "content-length":
			n, err := strconv.ParseUint(hf.Value, 10, 63)
			if err != nil || (st.declared >= 0 && int64(n) != st.declared) {
				return http2.StreamError{StreamID: id, Code: errCodeProtocol}
			}
			st.declared = int64(n)
		}
	}
	if c.streams == nil { // dropped as the loop parked
		c.streams = map[uint32]*Stream{}
	}
	c.streams[id] = st
	if st.declared > 0 {
		st.Body = true
	}
	if f.StreamEnded() {
		return c.endRequestLocked(st)
	}
	// The request goes on: its header list waits for its end, within the
	// connection's budget and the request timeout.
	size := 0
	for _, hf := range b.fields { // the pseudo-fields too
		size += int(hf.Size())
	}
	if c.pendingBytes+size > c.srv.maxPendingHeaders() {
		// Past the budget the handler answers at once, as for a header
		// list too large (the edge's 431); the fields go now.
		st.TooLarge, st.Fields = true, nil
		c.srv.streamCut(ReasonHeaderBudget)
		c.dispatchLocked(st)
		// The answer's credit is taken back, and then some: a client
		// that keeps pushing ends with ENHANCE_YOUR_CALM.
		return c.uselessLocked(2, ReasonHeaderBudget)
	}
	c.addPendingLocked(st, size)
	return nil
}

// endRequestLocked: the client ended st's request (END_STREAM).
func (c *conn) endRequestLocked(st *Stream) error {
	if st.declared >= 0 && st.declared != st.received {
		return http2.StreamError{StreamID: st.id, Code: errCodeProtocol}
	}
	c.active = true
	st.state = stateHalfClosedRemote
	if !st.dispatched {
		c.dispatchLocked(st)
	} else if st.ended {
		c.closeStreamLocked(st)
	}
	return nil
}

func (c *conn) processData(f *http2.DataFrame) error {
	id := f.StreamID
	state, st := c.state(id)
	if state == stateIdle {
		return http2.ConnectionError(errCodeProtocol)
	}
	if err := c.takeConnFlow(f); err != nil {
		return err
	}
	if st == nil || state != stateOpen {
		return http2.StreamError{StreamID: id, Code: errCodeStreamClosed}
	}
	if int64(f.Length) > st.recvWindow {
		return http2.StreamError{StreamID: id, Code: errCodeFlowControl}
	}
	st.recvWindow -= int64(f.Length)
	n := int64(len(f.Data()))
	if n == 0 && !f.StreamEnded() {
		if err := c.uselessLocked(1, ReasonFlood); err != nil {
			return err
		}
	}
	c.active = c.active || n > 0
	st.received += n
	if n > 0 && !st.dispatched {
		st.Body = true // the handler reads it from its start
	}
	if st.declared >= 0 && st.received > st.declared {
		return http2.StreamError{StreamID: id, Code: errCodeProtocol}
	}
	if f.StreamEnded() {
		return c.endRequestLocked(st)
	}
	if st.received > c.srv.maxBody() && !st.dispatched {
		c.dispatchLocked(st) // a body this long is refused anyway
	}
	return nil
}

// takeConnFlow counts a DATA frame against the connection's receive
// window and gives it straight back: the edge discards request bodies.
func (c *conn) takeConnFlow(f *http2.DataFrame) error {
	if int64(f.Length) > c.recvWindow {
		return http2.ConnectionError(errCodeFlowControl)
	}
	if f.Length > 0 {
		c.w.windowUpdate(0, f.Length)
	}
	return nil
}

// dispatchLocked starts st's handler.
func (c *conn) dispatchLocked(st *Stream) {
	c.unpendLocked(st)
	st.dispatched = true
	st.inHandler = true
	// A stream's context hangs from the server's, not from one of the
	// connection's: a connection's context would keep, for as long as
	// the connection idles, its done channel and the map its first
	// stream's context made in it (0.4 KB of each idle connection's
	// heap). The connection ending cancels its streams all the same: it
	// closes each (teardown, closeStreamLocked); the server's context
	// ending cancels them through the server's watch (cancelStreams),
	// which finds this one in c.streams, or, once it has run, here.
	base := c.srv.baseContext()
	st.ctx.parent = base
	if err := base.Err(); err != nil {
		st.ctx.cancel(err)
	}
	c.handlers++
	c.srv.runners.run(st)
}

func (c *conn) run(st *Stream) {
	defer c.handlerDone(st)
	c.srv.Handler(st)
}

func (c *conn) handlerDone(st *Stream) {
	p := recover()
	st.ctx.cancel(context.Canceled)
	c.mu.Lock()
	c.handlers--
	st.inHandler = false
	if !st.answered && st.state != stateClosed {
		c.resetLocked(st.id, errCodeInternal)
	}
	write := false
	if st.holdsWriter {
		st.holdsWriter = false
		c.w.hold--
		write = c.w.claimLocked()
	}
	// Other handlers of the connection still running may add their
	// answers to this write if it waits a round; with none, nothing of
	// this connection's would come of the wait (writer).
	yield := c.handlers > 0
	c.wakeIfQuietLocked()
	c.mu.Unlock()
	if p != nil && c.srv.Log != nil {
		c.srv.Log.Error("h2edge: handler panicked", "panic", p)
	}
	if write {
		c.w.write(yield) // the answer, and what came with it (writer.hold)
	}
}

// resetLocked sends RST_STREAM for id and closes the stream, if open.
func (c *conn) resetLocked(id uint32, code http2.ErrCode) {
	c.w.rstStream(id, code)
	if st := c.streams[id]; st != nil {
		c.closeStreamLocked(st)
	}
}

// closeStreamLocked forgets st: its answer (or what is left of it) is not
// sent, and its handler's context is cancelled.
func (c *conn) closeStreamLocked(st *Stream) {
	if st.state == stateClosed {
		return
	}
	st.state = stateClosed
	st.out = nil
	c.unpendLocked(st)
	c.active = true
	delete(c.streams, st.id)
	// What the client was sent on st and has not given back, it may
	// still give back (flood.go): the window st was opened with, less
	// what is left of it.
	c.closedWindow += max(0, c.initialWindow-st.sendWindow)
	c.openClosedLocked(st)
	if st.ctx.started() {
		st.ctx.cancel(context.Canceled)
	}
	c.wakeIfQuietLocked()
}

// quiet: no stream is open and no handler runs.
func (c *conn) quiet() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.quietLocked()
}

func (c *conn) quietLocked() bool { return len(c.streams) == 0 && c.handlers == 0 }

// goAway sends GOAWAY with code: no stream above the last one opened is
// served. With errCodeNo the connection ends when its streams have; with
// an error it ends now.
func (c *conn) goAway(code http2.ErrCode) {
	c.mu.Lock()
	c.goAwayLocked(code)
	c.mu.Unlock()
}

func (c *conn) goAwayLocked(code http2.ErrCode) {
	if !c.goneAway || code != errCodeNo {
		c.goneAway = true
		c.goAwayID = c.maxID
		c.w.goAway(c.maxID, code)
	}
	c.quitting.Store(true)
	c.wakeIfQuietLocked()
}

// wakeIfQuietLocked wakes the read loop of a connection that is to end
// once quiet, and now is.
func (c *conn) wakeIfQuietLocked() {
	if c.quitting.Load() && c.quietLocked() {
		c.nc.SetReadDeadline(time.Now())
	}
}

// linger reads and drops what the client still sends, for a moment (and
// at most goAwayLingerBytes), so that the GOAWAY just written reaches it
// before the connection closes.
func (c *conn) linger() {
	c.w.flushAndStop()
	c.nc.SetReadDeadline(time.Now().Add(goAwayLinger))
	_, _ = io.CopyN(io.Discard, c.nc, goAwayLingerBytes)
}

// teardown ends the connection: streams' contexts are cancelled, what is
// buffered is written, and the connection closed.
func (c *conn) teardown() {
	c.mu.Lock()
	c.closed = true
	for _, st := range c.streams {
		c.closeStreamLocked(st)
	}
	c.pending = nil
	c.setReasonLocked(ReasonClient)
	reason := c.reason
	c.mu.Unlock()
	c.w.flushAndStop()
	c.nc.Close()
	c.rd.release()
	c.srv.connClosed(reason)
}

// setReason records why the connection ends, if nothing did before.
func (c *conn) setReason(r string) {
	c.mu.Lock()
	c.setReasonLocked(r)
	c.mu.Unlock()
}

func (c *conn) setReasonLocked(r string) {
	if c.reason == "" {
		c.reason = r
	}
}
