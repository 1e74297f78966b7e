package h2edge

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2/hpack"

	"tradergate/internal/poison"
)

// Stream is one request and its answer. The request fields are set before
// the handler runs and not changed afterwards; the handler answers with
// Status, Field and Send, in that order, once.
type Stream struct {
	// The request, as decoded. Fields are the regular fields, names in
	// lower case, in the order sent; a field repeated is there twice.
	Method, Scheme, Authority, Path string
	Fields                          []hpack.HeaderField
	// TooLarge: the header list passed Server.MaxHeaderListSize; Fields
	// holds only what came before that point.
	TooLarge bool
	// Body: the request declared or sent a body.
	Body bool
	// Peer is the client's address.
	Peer netip.Addr

	c     *conn
	id    uint32
	ctx   streamCtx // its handler's context, from dispatch (streamctx.go)
	block *[]byte   // the answer's header block, made by the handler

	// Under c.mu.
	state      streamState
	declared   int64 // content-length, or -1
	received   int64 // body bytes received
	recvWindow int64
	sendWindow int64
	out        []byte // the answer's body not yet framed
	queued     bool   // in c.sending
	dispatched bool   // the handler was started
	inHandler  bool   // the handler runs
	// holdsWriter: the handler's Send held the writer (writer.hold), so
	// that the handler's goroutine writes the answer when it returns.
	holdsWriter bool
	answered    bool // Send was called
	ended       bool // the answer's END_STREAM is framed
	// pending: in c.pending, since pendingAt, holding headerBytes.
	pending     bool
	pendingAt   time.Time
	headerBytes int
	// open: an answer that stays open after the handler (open.go).
	open openStream
}

// Context is cancelled when the client resets the stream, the connection
// ends, the handler returns, or the server's BaseContext ends.
func (st *Stream) Context() context.Context { return &st.ctx }

// ID is the stream's identifier on its connection.
func (st *Stream) ID() uint32 { return st.id }

var blocks = sync.Pool{New: func() any {
	b := make([]byte, 0, 1024)
	return &b
}}

// putBlock gives a header block back to blocks, poisoned under the
// poison tag (tradergate/internal/poison).
func putBlock(b *[]byte) {
	poison.Fill((*b)[:cap(*b)])
	blocks.Put(b)
}

// Status begins the answer's header block with its status code.
func (st *Stream) Status(code int) {
	if st.block == nil {
		st.block = blocks.Get().(*[]byte)
	}
	b := (*st.block)[:0]
	if i := staticStatus(code); i != 0 {
		b = append(b, 0x80|i)
	} else {
		b = append(b, 0x08) // a literal, named by :status's index
		b = appendString(b, strconv.Itoa(code))
	}
	*st.block = b
}

// staticStatus is the index of code's entry in HPACK's static table
// (RFC 7541 appendix A), which sends it in one byte; 0 for a code that has
// none.
func staticStatus(code int) byte {
	switch code {
	case 200:
		return 8
	case 204:
		return 9
	case 206:
		return 10
	case 304:
		return 11
	case 400:
		return 12
	case 404:
		return 13
	case 500:
		return 14
	}
	return 0
}

// Field adds a field to the answer begun by Status.
func (st *Stream) Field(n Name, value string) {
	b := append(*st.block, n.enc...)
	*st.block = appendString(b, value)
}

// Send ends the handler's part: the header block, then body (none if
// empty) in DATA frames as the client's flow-control windows allow. body
// must not change until the stream ends; the caller gives it up. Called
// by the handler, the answer is written when the handler returns, by its
// goroutine (writer.hold): a handler returns soon after its Send.
func (st *Stream) Send(body []byte) {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.answered {
		return
	}
	st.answered = true
	if st.inHandler {
		// The answer is written by this goroutine once the handler
		// returns (handlerDone), rather than handed to a runner of its
		// own: one goroutine switch and one wake fewer per answer.
		st.holdsWriter = true
		c.w.hold++
	}
	block := st.block
	st.block = nil
	if st.state == stateClosed || c.closed {
		if block != nil {
			putBlock(block)
		}
		return
	}
	if block == nil { // Send without Status: nothing to answer with
		c.resetLocked(st.id, errCodeInternal)
		return
	}
	defer putBlock(block)
	var prefix []byte
	if c.tableSizeDirty {
		// The client lowered SETTINGS_HEADER_TABLE_SIZE: the next block
		// says the encoder's table (always empty) is that size now
		// (RFC 7541 section 4.2).
		prefix = appendInt(nil, 5, 0x20, uint64(c.tableMax))
		c.tableSizeDirty = false
	}
	c.w.headers(st.id, prefix, *block, len(body) == 0, c.maxFrame)
	if len(body) == 0 {
		c.answerSentLocked(st)
		return
	}
	st.out = body
	c.wantSendLocked(st)
	c.pumpLocked()
}

// Name is an answer field's name, encoded once: an HPACK literal without
// indexing, naming the field by its static-table index where it has one.
// No entry is ever added to the dynamic table, so answers are encoded
// without state and without the connection's lock.
type Name struct{ enc string }

// NewName encodes name (any case: HTTP/2 sends it in lower case).
func NewName(name string) Name {
	lower := strings.ToLower(name)
	if i, ok := staticNames[lower]; ok {
		return Name{string(appendInt(nil, 4, 0x00, uint64(i)))}
	}
	return Name{string(appendString([]byte{0x00}, lower))}
}

// staticNames are HPACK's static-table names an answer may carry (RFC
// 7541 appendix A), by their first index.
var staticNames = map[string]int{
	"age": 21, "cache-control": 24, "content-encoding": 26, "content-length": 28,
	"content-type": 31, "date": 33, "etag": 34, "expires": 36, "last-modified": 44,
	"link": 45, "location": 46, "retry-after": 53, "server": 54,
	"strict-transport-security": 56, "vary": 59, "www-authenticate": 61,
}

// appendInt appends i as an HPACK integer with an n-bit prefix, the
// prefix byte's high bits given by first (RFC 7541 section 5.1).
func appendInt(dst []byte, n uint, first byte, i uint64) []byte {
	limit := uint64(1)<<n - 1
	if i < limit {
		return append(dst, first|byte(i))
	}
	dst = append(dst, first|byte(limit))
	i -= limit
	for i >= 128 {
		dst = append(dst, byte(i&0x7f|0x80))
		i >>= 7
	}
	return append(dst, byte(i))
}

// appendString appends s as an HPACK string literal, not Huffman-coded:
// a copy costs less CPU than the code, and answers' values are short.
func appendString(dst []byte, s string) []byte {
	dst = appendInt(dst, 7, 0, uint64(len(s)))
	return append(dst, s...)
}
