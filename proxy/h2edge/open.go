package h2edge

import "errors"

// Answers that stay open: a body the handler does not have whole when it
// answers (a stream of server-sent events), written piece by piece for
// as long as the stream lasts, after the handler has returned.
//
// Each piece is queued on the stream and framed as the client's windows
// allow, by the same pump as every answer: a stream whose window is
// closed keeps its bytes queued and never holds up the connection's other
// streams. Write never blocks; it tells the caller how much is queued, so
// that the caller bounds it.

// ErrStreamClosed is what Write returns once the stream has ended.
var ErrStreamClosed = errors.New("h2edge: stream closed")

// openStream is what an open answer adds to its Stream.
type openStream struct {
	// counted: the answer is open and counted in conn.open; body: more
	// body may come (End not called yet).
	counted, body bool
	// drained runs, under the connection's lock, whenever what was
	// queued has all been framed; gone runs once the stream has closed,
	// on a goroutine of its own.
	drained, gone func()
}

// Open sends the header block begun by Status and Field without ending
// the stream. The body then comes by Write, until End or Cut; the handler
// may return at once, the stream stays open. drained (which must not
// block: it runs under the connection's lock) is called each time the
// queued body has all been framed, gone once the stream has closed
// (reset by the client, the connection ended, or the answer done). It
// reports false when the stream has closed already (gone is not called).
func (st *Stream) Open(drained, gone func()) bool {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.answered {
		return false
	}
	st.answered = true
	block := st.block
	st.block = nil
	if block == nil || st.state == stateClosed || c.closed {
		if block != nil {
			putBlock(block)
		}
		if st.state != stateClosed && !c.closed {
			c.resetLocked(st.id, errCodeInternal)
		}
		return false
	}
	defer putBlock(block)
	var prefix []byte
	if c.tableSizeDirty {
		prefix = appendInt(nil, 5, 0x20, uint64(c.tableMax))
		c.tableSizeDirty = false
	}
	c.w.headers(st.id, prefix, *block, false, c.maxFrame)
	st.open = openStream{counted: true, body: true, drained: drained, gone: gone}
	c.open++
	c.active = true
	return true
}

// Write queues p (copied) as the open answer's next bytes, and returns
// how many bytes of it are queued and not yet framed.
func (st *Stream) Write(p []byte) (queued int, err error) {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if !st.open.body || st.state == stateClosed || c.closed {
		return 0, ErrStreamClosed
	}
	if len(p) > 0 {
		st.out = append(st.out, p...)
		c.wantSendLocked(st)
		c.pumpLocked()
	}
	return len(st.out), nil
}

// End ends the open answer once what is queued has been framed.
func (st *Stream) End() {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if !st.open.body || st.state == stateClosed {
		return
	}
	st.open.body = false
	if len(st.out) == 0 && !c.closed {
		c.w.data(st.id, nil, true)
		c.answerSentLocked(st)
	}
	// Otherwise the pump frames END_STREAM with the last bytes.
}

// Cut resets the stream (CANCEL), dropping what is queued.
func (st *Stream) Cut() {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.state != stateClosed && !c.closed {
		c.resetLocked(st.id, errCodeCancel)
	}
}

// openClosedLocked: st closed; an open answer stops counting, and its
// gone is told.
func (c *conn) openClosedLocked(st *Stream) {
	if !st.open.counted {
		return
	}
	st.open.counted, st.open.body = false, false
	c.open--
	if g := st.open.gone; g != nil {
		go g()
	}
}

// framedLocked: n bytes of st's queued body were framed, end whether
// they were the last queued. It reports whether the frame ends the
// stream: the last bytes of an answer that is not (or no longer) open.
func (st *Stream) framedLocked(end bool) (fin bool) {
	if !st.open.counted {
		return end
	}
	if !end {
		return false
	}
	if !st.open.body {
		return true
	}
	if st.open.drained != nil {
		st.open.drained()
	}
	return false
}
