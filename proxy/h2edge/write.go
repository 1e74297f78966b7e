package h2edge

import (
	"encoding/binary"
	"errors"
	"net"
	"runtime"
	"sync"
	"time"

	"golang.org/x/net/http2"

	"tradergate/internal/poison"
)

// writer is a connection's write side: frames are appended to buf, under
// the connection's mu, by the read loop (control frames) and by handlers
// (answers), and a goroutine writes buf to the connection.
//
// That goroutine writes only while there is something to write: the first
// frame appended to an empty buffer hands the writes to one of the
// server's runners (runners.go), which goes back to the server's runners
// once the buffer is drained, so that an idle connection holds no
// goroutine (and no stack) but its read loop's.
//
// A handler's answer is the exception: a handler's Send holds the writer
// (hold), and the handler's own goroutine, once the handler returns,
// writes what is buffered by then (conn.handlerDone), as the runner
// would have, but without the hand-off to it. Frames appended meanwhile
// by the read loop (a PING's answer, a WINDOW_UPDATE) wait for that
// moment too: the rest of a handler after its Send is only its release
// of the exchange.
//
// A burst is written once: the goroutine first lets the goroutines that
// are ready to run (the read loop, the handlers of the connection's other
// streams) take their turn, then writes everything they appended in one
// Write, one TLS record per 16 KiB rather than one per answer. No timer:
// a lone answer waits only for the scheduler's round. A handler whose
// connection has no other handler running skips even that: its answer
// would wait behind every other connection's ready work for frames that
// nothing of its own connection is making (conn.handlerDone).
type writer struct {
	c   *conn
	buf []byte // frames not yet handed to the connection; nil when none
	// bufp is the pool's holder of buf's array, given back with it: a
	// new holder per Put would be an allocation per write.
	bufp     *[]byte
	inflight bool // a Write of the goroutine's is under way
	running  bool // the goroutine runs: it writes buf before it ends
	// hold counts the handlers that have sent their answer and will
	// write it when they return: no runner is started while one does.
	hold    int
	err     error // the first write error: nothing is written after it
	stopped bool
	// ended, if set, is closed when the goroutine ends (flushAndStop).
	ended chan struct{}
}

const (
	// bufHigh is how much DATA the writer holds before the streams that
	// have more wait for it to be written: the connection is then not
	// reading as fast as answers are made.
	bufHigh = 64 << 10
	// bufMax is the most the writer holds at all: a client that keeps
	// asking for control frames (PING, SETTINGS, resets) and reads none
	// of them is cut off there.
	bufMax = 1 << 20
	// lastWriteTimeout bounds the write of what is left when a
	// connection ends, when the server has no WriteTimeout.
	lastWriteTimeout = 5 * time.Second
)

var errFlood = errors.New("h2edge: the client does not read what it asks for")

var bufs = sync.Pool{New: func() any {
	b := make([]byte, 0, 32<<10)
	return &b
}}

func (w *writer) init(c *conn) {
	w.c = c
}

// run is the writer's part of a runner: it writes what is buffered until
// the buffer stays empty, then returns.
func (w *writer) run() { w.write(true) }

// write writes what is buffered until the buffer stays empty, first
// letting the goroutines ready to run append theirs when yield is set.
func (w *writer) write(yield bool) {
	if yield {
		runtime.Gosched()
	}
	c := w.c
	for {
		for w.flushOnce() {
		}
		c.mu.Lock()
		if len(w.buf) > 0 && w.err == nil {
			c.mu.Unlock() // appended after flushOnce looked
			continue
		}
		w.running = false
		if w.ended != nil {
			close(w.ended)
			w.ended = nil
		}
		c.mu.Unlock()
		return
	}
}

// flushOnce writes what is buffered; it reports whether more was
// buffered meanwhile.
func (w *writer) flushOnce() bool {
	c := w.c
	c.mu.Lock()
	buf, bufp := w.buf, w.bufp
	if len(buf) == 0 || w.err != nil {
		c.mu.Unlock()
		return false
	}
	w.buf, w.bufp = nil, nil
	w.inflight = true
	c.mu.Unlock()

	if d := c.srv.WriteTimeout; d > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(d))
	}
	_, err := c.nc.Write(buf)
	if cap(buf) <= 4*bufHigh {
		poison.Fill(buf[:cap(buf)])
		*bufp = buf[:0]
		bufs.Put(bufp)
	}

	c.mu.Lock()
	w.inflight = false
	if err != nil {
		w.err = err
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.setReasonLocked(ReasonSlowReader)
		}
		c.mu.Unlock()
		c.nc.Close() // the read loop ends too
		return false
	}
	c.pumpLocked() // room again for streams that have more
	more := len(w.buf) > 0
	c.mu.Unlock()
	return more
}

// flushAndStop writes what is buffered and waits for the goroutine, if
// it runs, to end; frames appended later are dropped.
func (w *writer) flushAndStop() {
	c := w.c
	if c.srv.WriteTimeout <= 0 {
		// The last write is bounded all the same: a client that reads
		// nothing does not hold the connection forever.
		c.nc.SetWriteDeadline(time.Now().Add(lastWriteTimeout))
	}
	c.mu.Lock()
	w.stopped = true
	if w.running {
		if w.ended == nil {
			w.ended = make(chan struct{})
		}
		ended := w.ended
		c.mu.Unlock()
		<-ended
		return
	}
	c.mu.Unlock()
	// No goroutine runs, and none starts once stopped: what is left (only
	// after a write error, which drops it) is written here.
	for w.flushOnce() {
	}
}

// pending: frames are buffered or being written.
func (w *writer) pending() bool { return len(w.buf) > 0 || w.inflight }

// room is how much more DATA may be buffered.
func (w *writer) room() int { return bufHigh - len(w.buf) }

// frame appends one frame's header and leaves the payload to the caller;
// it returns false when nothing may be written any more.
func (w *writer) frame(typ http2.FrameType, flags http2.Flags, id uint32, length int) bool {
	if w.err != nil || w.stopped {
		return false
	}
	if len(w.buf) > bufMax {
		w.err = errFlood
		w.c.setReasonLocked(ReasonSlowReader)
		// Not under the lock: closing a TLS connection may first try to
		// send its close_notify.
		go w.c.nc.Close()
		return false
	}
	if w.buf == nil {
		w.bufp = bufs.Get().(*[]byte)
		w.buf = (*w.bufp)[:0]
	}
	w.buf = append(w.buf, byte(length>>16), byte(length>>8), byte(length), byte(typ), byte(flags))
	w.buf = binary.BigEndian.AppendUint32(w.buf, id&(1<<31-1))
	if w.claimLocked() {
		w.c.srv.runners.run(w)
	}
	return true
}

// claimLocked makes the caller the one that writes, when nothing holds
// or runs the writer and something is to be written: the caller then
// calls run, or hands it to a runner (frame).
func (w *writer) claimLocked() bool {
	if w.running || w.hold > 0 || len(w.buf) == 0 || w.err != nil || w.stopped {
		return false
	}
	w.running = true
	return true
}

func (w *writer) settings(vals ...http2.Setting) {
	if w.frame(http2.FrameSettings, 0, 0, 6*len(vals)) {
		for _, s := range vals {
			w.buf = binary.BigEndian.AppendUint16(w.buf, uint16(s.ID))
			w.buf = binary.BigEndian.AppendUint32(w.buf, s.Val)
		}
	}
}

func (w *writer) settingsAck() { w.frame(http2.FrameSettings, http2.FlagSettingsAck, 0, 0) }

func (w *writer) ping(data [8]byte) {
	if w.frame(http2.FramePing, http2.FlagPingAck, 0, 8) {
		w.buf = append(w.buf, data[:]...)
	}
}

func (w *writer) windowUpdate(id, inc uint32) {
	if w.frame(http2.FrameWindowUpdate, 0, id, 4) {
		w.buf = binary.BigEndian.AppendUint32(w.buf, inc)
	}
}

func (w *writer) rstStream(id uint32, code http2.ErrCode) {
	if w.frame(http2.FrameRSTStream, 0, id, 4) {
		w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(code))
	}
}

func (w *writer) goAway(last uint32, code http2.ErrCode) {
	if w.frame(http2.FrameGoAway, 0, 0, 8) {
		w.buf = binary.BigEndian.AppendUint32(w.buf, last)
		w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(code))
	}
}

// headers writes a header block, prefix then block, as a HEADERS frame
// and as many CONTINUATION frames as maxFrame requires.
func (w *writer) headers(id uint32, prefix, block []byte, endStream bool, maxFrame int) {
	var flags http2.Flags
	if endStream {
		flags = http2.FlagHeadersEndStream
	}
	typ := http2.FrameHeaders
	for first := true; first || len(block) > 0; first = false {
		n := len(prefix) + len(block)
		f := flags
		if n <= maxFrame {
			f |= http2.FlagHeadersEndHeaders
		} else {
			n = maxFrame
		}
		if !w.frame(typ, f, id, n) {
			return
		}
		k := min(len(prefix), n)
		w.buf = append(w.buf, prefix[:k]...)
		prefix = prefix[k:]
		w.buf = append(w.buf, block[:n-k]...)
		block = block[n-k:]
		typ, flags = http2.FrameContinuation, 0
	}
}

func (w *writer) data(id uint32, p []byte, endStream bool) {
	var flags http2.Flags
	if endStream {
		flags = http2.FlagDataEndStream
	}
	if w.frame(http2.FrameData, flags, id, len(p)) {
		w.buf = append(w.buf, p...)
	}
}

// writeSettingsLocked sends the edge's SETTINGS, the connection's first
// frame.
func (c *conn) writeSettingsLocked() {
	c.w.settings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.srv.maxStreams()},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.srv.maxHeaderList()},
	)
	c.unacked++
}

// wantSendLocked puts st in line for DATA, if it has some and the window
// to send it.
func (c *conn) wantSendLocked(st *Stream) {
	if !st.queued && len(st.out) > 0 && st.sendWindow > 0 && st.state != stateClosed {
		st.queued = true
		c.sending = append(c.sending, st)
	}
}

// pumpLocked frames DATA for the streams in line, a frame each in turn,
// as far as the flow-control windows and the write buffer allow.
func (c *conn) pumpLocked() {
	for len(c.sending) > 0 && c.sendWindow > 0 {
		room := c.w.room()
		if room <= 0 || c.w.err != nil || c.w.stopped {
			return
		}
		st := c.sending[0]
		c.sending[0] = nil
		c.sending = c.sending[1:]
		st.queued = false
		if st.state == stateClosed || len(st.out) == 0 || st.sendWindow <= 0 {
			continue // a window update puts it back in line
		}
		n := int64(min(len(st.out), c.maxFrame, room))
		n = min(n, st.sendWindow, c.sendWindow)
		end := n == int64(len(st.out))
		fin := st.framedLocked(end) // an open answer's last bytes do not end it
		c.w.data(st.id, st.out[:n], fin)
		c.active = true
		st.out = st.out[n:]
		st.sendWindow -= n
		c.sendWindow -= n
		if end {
			st.out = nil
			if fin {
				c.answerSentLocked(st)
			}
		} else {
			c.wantSendLocked(st)
		}
	}
	if len(c.sending) == 0 {
		// Back to the connection's own array: a longer one made for a
		// burst goes.
		clear(c.sendingArr[:])
		c.sending = c.sendingArr[:0]
	}
}

// answerSentLocked: st's answer has its END_STREAM. A client still
// sending a request body is told to stop (RFC 9113 section 8.1).
func (c *conn) answerSentLocked(st *Stream) {
	st.ended = true
	c.active = true
	c.usefulLocked()
	switch st.state {
	case stateHalfClosedRemote:
		c.closeStreamLocked(st)
	case stateOpen:
		c.resetLocked(st.id, errCodeNo)
	}
}
