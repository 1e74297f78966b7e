package front

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"tradergate/proxy/h2edge"
	"tradergate/proxy/stream"
	"tradergate/proxy/wire"
)

// Each front's way of holding an event stream open (docs/CONTRACT.md,
// "Streams"): the steps open it (proxy/streams.go) and leave it in the
// answer (wire.Answer.Stream); the front writes the answer's head, then
// hands the stream a Sink it writes its events to until it ends.
// proxy/stream does the rest: the shared pollers, the catch-up, the fleet.

// startFast starts an opened stream on an HTTP/1.1 connection: fasthttp
// hands the connection over once the handler returns, without writing
// anything (HijackSetNoResponse); the stream's sink writes the head
// itself, then the chunks, and closes the connection when the stream
// ends (stream.ConnSink says why it does not use a streamed body).
func (e *Edge) startFast(r *wire.Request, a *wire.Answer, ctx *fasthttp.RequestCtx) {
	sub := a.Stream
	head := make([]byte, 0, 512)
	head = append(head, "HTTP/1.1 200 OK\r\n"...)
	for _, f := range a.Headers() {
		head = appendHeadField(head, f.Name, f.Value)
	}
	if ctx.IsTLS() {
		if hsts := e.hstsValue(); hsts != "" {
			head = appendHeadField(head, "Strict-Transport-Security", hsts)
		}
	}
	head = appendHeadField(head, "Date", httpDate(r.Arrived))
	head = append(head, "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"...)
	timeout := e.streamWriteTimeout
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok {
			c = u.UnsafeConn() // not fasthttp's reader, which holds its buffer
		}
		sub.Start(stream.NewConnSink(c, c, head, sub, timeout))
	})
}

// appendHeadField appends "name: value\r\n", any CR or LF of value made a
// space, as fasthttp does, so that no value splits the head.
func appendHeadField(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, ':', ' ')
	for i := 0; i < len(value); i++ {
		c := value[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return append(b, '\r', '\n')
}

// startH2 starts an opened stream on an HTTP/2 stream held open
// (h2edge's Open): its DATA go out as the client's windows allow.
func (e *Edge) startH2(r *wire.Request, a *wire.Answer, st *h2edge.Stream) {
	sub := a.Stream
	st.Status(a.Status)
	for _, f := range a.Headers() {
		st.Field(h2Name(f.Name), f.Value)
	}
	if hsts := e.hstsValue(); hsts != "" {
		st.Field(h2HSTS, hsts)
	}
	st.Field(h2Date, httpDate(r.Arrived))
	if !st.Open(sub.Drained, func() { sub.Gone(nil) }) {
		sub.Abandon()
		return
	}
	sub.Start(&h2Sink{st: st, timeout: e.streamWriteTimeout})
}

// h2Sink is a stream's Sink on an HTTP/2 stream held open.
type h2Sink struct {
	st      *h2edge.Stream
	timeout time.Duration
}

func (k *h2Sink) Write(p []byte) (int, error) { return k.st.Write(p) }

// End ends the stream once its last bytes are framed; a client whose
// window stays closed past the write timeout has the stream reset.
func (k *h2Sink) End() {
	k.st.End()
	time.AfterFunc(k.timeout, k.st.Cut)
}

func (k *h2Sink) Cut() { k.st.Cut() }

// serveStdStream holds an opened stream on the net/http front until it
// ends: its handler's goroutine writes and flushes what the stream
// queued.
func (e *Edge) serveStdStream(w http.ResponseWriter, r *http.Request, sub *stream.Subscriber) {
	k := &stdSink{wake: make(chan struct{}, 1)}
	sub.Start(k)
	rc := http.NewResponseController(w)
	for {
		select {
		case <-k.wake:
		case <-r.Context().Done():
			sub.Gone(r.Context().Err())
			return
		}
		k.mu.Lock()
		b, ending, closed := k.buf, k.ending, k.closed
		k.buf, k.inflight = nil, len(b)
		k.mu.Unlock()
		if closed {
			sub.Gone(nil)
			return
		}
		if len(b) > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(e.streamWriteTimeout))
			_, err := w.Write(b)
			if err == nil {
				err = rc.Flush()
			}
			if err != nil {
				sub.Gone(err)
				return
			}
		}
		k.mu.Lock()
		k.inflight = 0
		done := ending && len(k.buf) == 0
		k.mu.Unlock()
		sub.Drained()
		if done {
			sub.Gone(nil)
			return
		}
	}
}

// stdSink is a stream's Sink on the net/http front.
type stdSink struct {
	mu       sync.Mutex
	buf      []byte
	inflight int
	ending   bool
	closed   bool
	wake     chan struct{}
}

func (k *stdSink) signal() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

func (k *stdSink) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed || k.ending {
		return 0, errStreamEnded
	}
	if len(p) > 0 {
		k.buf = append(k.buf, p...)
		k.signal()
	}
	return len(k.buf) + k.inflight, nil
}

func (k *stdSink) End() {
	k.mu.Lock()
	k.ending = true
	k.mu.Unlock()
	k.signal()
}

func (k *stdSink) Cut() {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.signal()
}

var errStreamEnded = errors.New("stream ended")
