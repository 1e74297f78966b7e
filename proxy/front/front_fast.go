package front

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"unsafe"

	"github.com/valyala/fasthttp"

	"tradergate/proxy/tlsedge"
	"tradergate/proxy/wire"
)

// The HTTP/1.1 front: fasthttp (plain, and TLS connections that did not
// negotiate h2). On a cache hit net/http alone costs more CPU than nginx's
// whole answer; fasthttp's server costs about half of it
// (docs/BENCHMARKS.md). This file only moves a request into an exchange
// and the answer back out; every decision is in the steps.

// serveFast is the fasthttp handler.
func (e *Edge) serveFast(ctx *fasthttp.RequestCtx) {
	x := e.steps.Exchange(e.baseContext(), true)
	r := x.In()
	e.readFast(r, ctx)
	if a := x.Serve(); a.Stream != nil {
		e.startFast(r, a, ctx) // stream.go: fasthttp hands the connection over
	} else {
		e.writeFast(a, ctx) // copies every header value: x may go back now
	}
	x.Release()
}

// readFast fills the request x. fasthttp owns the bytes it hands
// out and reuses them once the handler returns: the target is copied (the
// canonical request, which a flight keeps, is cut from it); header values
// are viewed in place, because the steps read them only while serve runs,
// and what outlives it is copied where it is kept (requestID).
func (e *Edge) readFast(x *wire.Request, ctx *fasthttp.RequestCtx) {
	// fasthttp read the clock as the request came in: the edge's start
	// is that reading rather than one more (a hit is short enough for a
	// clock read to show in its profile).
	x.Arrived = ctx.Time()
	h := &ctx.Request.Header
	switch {
	case h.IsGet():
		x.Method = http.MethodGet
	case h.IsHead():
		x.Method = http.MethodHead
	default:
		x.Method = string(h.Method())
	}
	x.CopyTarget(h.RequestURI())
	// ContentLength is -1 for a chunked body, -2 for none declared.
	x.HasBody = h.ContentLength() > 0 || h.ContentLength() == -1 || len(ctx.Request.Body()) > 0
	x.Peer = peerAddr(ctx.RemoteAddr())
	if readHeaders(x, h.RawHeaders(), e.traced) {
		x.Refused = wire.RefusedMalformed
	}
	if p := h.Protocol(); x.Refused == 0 && !bytes.Equal(p, http11) && !bytes.Equal(p, http10) {
		// fasthttp reads any HTTP/d.d as 1.1; the edge speaks 1.0 and 1.1
		// here (HTTP/2 only after ALPN): RFC 9110 section 15.6.6.
		x.Refused = wire.RefusedHTTPVersion
	}
	// A plain TCP connection (not TLS) can be sent a page file.
	x.Sendfile = tcpConnOf(ctx.Conn()) != nil
}

var http11, http10 = []byte("HTTP/1.1"), []byte("HTTP/1.0")

// readHeaders reads the fields the steps use from the header block as it
// came off the wire, in one pass that also checks its framing, and reports
// framing that fasthttp reads generously but a load balancer in front may
// read otherwise, so that one byte stream could be two different requests
// to the two of them: a line ending in a bare LF, an obsolete folded line,
// whitespace before a colon, or both Content-Length and Transfer-Encoding
// (RFC 9112 sections 2.2, 5.1, 5.2 and 6.1). Such a request is refused and
// its connection closed.
//
// One pass over the raw block, rather than fasthttp's Peek per field, which
// walks every field again; the fields found are kept by readField's rules.
func readHeaders(x *wire.Request, raw []byte, traced bool) (malformed bool) {
	var cl, te bool
	for len(raw) > 0 {
		i := bytes.IndexByte(raw, '\n')
		if i < 0 {
			return false
		}
		if i == 0 || raw[i-1] != '\r' {
			return true
		}
		line := raw[:i-1]
		raw = raw[i+1:]
		if len(line) == 0 {
			break // the end of the headers
		}
		if line[0] == ' ' || line[0] == '\t' {
			return true
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || line[colon-1] == ' ' || line[colon-1] == '\t' {
			return true
		}
		name := line[:colon]
		var f wire.Field
		switch len(name) {
		case 10:
			if fieldIs(name, "Tracestate") {
				f = wire.FieldTracestate
			}
		case 11:
			if fieldIs(name, "Traceparent") {
				f = wire.FieldTraceparent
			}
		case 12:
			if fieldIs(name, "X-Request-Id") {
				f = wire.FieldRequestID
			}
		case 13:
			switch {
			case fieldIs(name, "Authorization"):
				f = wire.FieldAuthorization
			case fieldIs(name, "If-None-Match"):
				f = wire.FieldIfNoneMatch
			case fieldIs(name, "Last-Event-ID"):
				f = wire.FieldLastEventID
			}
		case 14:
			cl = cl || fieldIs(name, "Content-Length")
		case 15:
			switch {
			case fieldIs(name, "Accept-Encoding"):
				f = wire.FieldAcceptEncoding
			case fieldIs(name, "X-Forwarded-For"):
				f = wire.FieldForwardedFor
			}
		case 17:
			te = te || fieldIs(name, "Transfer-Encoding")
		}
		if f != 0 {
			x.ReadField(f, view(trimOWS(line[colon+1:])), traced)
		}
	}
	return cl && te
}

// trimOWS cuts the optional white space around a field value (RFC 9110
// section 5.6.3).
func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// fieldIs reports whether a field name is name, ignoring ASCII case (field
// names are case-insensitive, RFC 9110 section 5.1).
func fieldIs(b []byte, name string) bool {
	if len(b) != len(name) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c, n := b[i], name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= n && n <= 'Z' {
			n += 'a' - 'A'
		}
		if c != n {
			return false
		}
	}
	return true
}

// writeFast hands the answer to fasthttp. Values are copied into its
// buffers; the body is handed over as is (a cached page is never written
// to, and fasthttp only reads it).
//
// The fields go in with Add, names as they are: the exchange holds each
// name once (setHeader replaces) and only in canonical form (the names
// are the edge's own constants; a test reads them off the wire), so
// fasthttp's Set, which rewrites each name's case and looks for an earlier
// field of that name, would only repeat that work on every answer. Add
// still turns a CR or LF in a value into a space, so no value can split
// the header block.
func (e *Edge) writeFast(x *wire.Answer, ctx *fasthttp.RequestCtx) {
	resp := &ctx.Response
	resp.SetStatusCode(x.Status)
	resp.Header.DisableNormalizing() // until the response is reset
	for _, f := range x.Headers() {
		resp.Header.Add(f.Name, f.Value)
	}
	if ctx.IsTLS() {
		if hsts := e.hstsValue(); hsts != "" {
			resp.Header.Add("Strict-Transport-Security", hsts)
		}
	}
	if x.File != nil {
		// fasthttp flushes the header block first, which the kernel
		// holds for the file's first bytes (newFileBody), then the file
		// follows (fileBody).
		resp.ImmediateHeaderFlush = true
		resp.SetBodyStream(newFileBody(x.File, ctx.Conn(), x.Body), len(x.Body))
	} else {
		resp.SetBodyRaw(x.Body)
	}
	if x.CloseConn || x.Status == wire.StatusClientClosed {
		ctx.SetConnectionClose()
	}
	if x.CloseConn {
		// The edge ends the connection where the client may still be
		// sending (the rest of a refused request, or requests behind
		// it): it reads that first, so that the answer is not lost to a
		// reset (linger.go).
		lingerOnClose(ctx.Conn())
	}
}

// errorFast answers what fasthttp refused to parse, through the same
// steps and in the same envelope as everything else (the steps read
// wire.Request.Refused): a request too large for the header buffer (431, or
// 414 when the request line alone fills it), one that timed out (408), or
// one that is not HTTP as the edge reads it (400). Every 4XX carries the
// rate limit fields (docs/openapi.json), charged to the client's address,
// and one on a legacy path is variant B with the legacy headers. fasthttp
// closes the connection after it.
func (e *Edge) errorFast(ctx *fasthttp.RequestCtx, err error) {
	x := e.steps.Exchange(e.baseContext(), true)
	defer x.Release()
	r := x.In()
	r.Method = "-"
	r.Peer = peerAddr(ctx.RemoteAddr())
	if method, target, whole, ok := requestLineOf(ctx.Conn()); ok {
		r.Method = method
		r.SetTarget(target) // a copy of its own (lfScan.requestLine)
		r.TargetCut = !whole
	}
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.As(err, &small) && r.TargetCut && e.cfg.MaxHeaderBytes-len(r.Method)-1 > wire.MaxTargetBytes:
		// The request line alone filled the buffer: its target is over
		// 8 KiB, which is 414 wherever it is seen (proxy's checkLength).
		r.Refused = wire.RefusedURITooLong
	case errors.As(err, &small):
		r.Refused = wire.RefusedHeaderTooLarge
	case errors.As(err, &ne) && ne.Timeout():
		r.Refused = wire.RefusedTimeout
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		r.Refused = wire.RefusedBody
	default:
		r.Refused = wire.RefusedMalformed
	}
	e.writeFast(x.Serve(), ctx)
}

// fastServer is the fasthttp server of the client listener, with the
// limits of the server section.
func (e *Edge) fastServer() *fasthttp.Server {
	c := e.cfg
	return &fasthttp.Server{
		Handler:      e.serveFast,
		ErrorHandler: e.errorFast,
		// A refused request's bytes may hold a key: fasthttp leaves them
		// out of its errors (errorFast reads the request line from the
		// connection, front_conn.go).
		SecureErrorLogMessage: true,
		// fasthttp has one read timeout for the whole request; every
		// request here is headers only (a body is refused), so the header
		// timeout is the one that matters against slow clients.
		ReadTimeout:  min(c.ReadHeaderTimeout, c.ReadTimeout),
		WriteTimeout: c.WriteTimeout,
		IdleTimeout:  c.IdleTimeout,
		// The read buffer bounds the request line and headers.
		ReadBufferSize: c.MaxHeaderBytes,
		// An answer that does not fit the write buffer leaves in two
		// writes: fasthttp sends header and body in one writev only on a
		// bare *net.TCPConn, and the front's connections are wrapped
		// (front_conn.go). 16 KiB holds a 20-item page and its header.
		WriteBufferSize:    frontWriteBuffer,
		MaxRequestBodySize: maxRequestBody,
		// On the TLS listener, where clients connect directly and may
		// keep many connections idle, an idle connection holds neither
		// buffer nor request context: fasthttp takes them from its pools
		// when a request's first byte arrives, and gives them back once
		// its answer is written. That first byte is read alone; TLS has
		// the whole record decrypted by then, so the rest costs no system
		// call, where on plain TCP it would cost one more read per
		// request (docs/BENCHMARKS.md, "Idle connections").
		ReduceMemoryUsage: c.TLS.Mode != tlsedge.ModeOff,
		// Drain: answers sent while shutting down close their connection.
		CloseOnShutdown: true,
		// A stream's connection, taken over (stream.go), is the stream's
		// to close.
		KeepHijackedConns:            true,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		DisablePreParseMultipartForm: true,
		Logger:                       fastLogger{e.log},
		ConnState:                    e.conns.track,
	}
}

// frontWriteBuffer is the write buffer each HTTP/1.1 connection holds.
const frontWriteBuffer = 16 << 10

// maxRequestBody is what fasthttp reads of a body before the route step
// refuses it: enough to answer a small body with the contract's 400, small
// enough that no client can make the edge hold much.
const maxRequestBody = 4 << 10

// view is b as a string without a copy, valid only while fasthttp keeps b:
// for values read during the handler and not kept.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// peerAddr is the address of a connection's peer, or the zero Addr.
func peerAddr(a net.Addr) netip.Addr {
	if tcp, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(tcp.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

// fastLogger sends fasthttp's own lines (connection errors) to slog at
// debug: they are a client's doing, and the access log has the answers.
type fastLogger struct{ log *slog.Logger }

func (l fastLogger) Printf(format string, args ...any) {
	// Its errors hold none of a request's bytes (SecureErrorLogMessage),
	// so none of a key.
	l.log.Debug("fasthttp", "line", fmt.Sprintf(format, args...))
}

// conns tracks the connections of the fasthttp server, so that what is
// still open when the drain time is over can be cut off: fasthttp's
// Shutdown waits for connections but cannot close a busy one.
type conns struct {
	mu   sync.Mutex
	open map[net.Conn]struct{}
}

func (c *conns) track(conn net.Conn, st fasthttp.ConnState) {
	switch st {
	case fasthttp.StateNew:
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.open == nil {
			c.open = map[net.Conn]struct{}{}
		}
		c.open[conn] = struct{}{}
	case fasthttp.StateClosed, fasthttp.StateHijacked:
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.open, conn)
	}
	// Active and Idle come twice with every request: they take no lock.
}

// closeAll cuts off every connection still open.
func (c *conns) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for conn := range c.open {
		_ = conn.Close()
	}
}

// FastHandler is the HTTP/1.1 front's handler, for benchmarks and tests
// that drive it with a fasthttp.RequestCtx of their own.
func (e *Edge) FastHandler() fasthttp.RequestHandler { return e.serveFast }
