package front

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Lingering close. When the edge ends a connection on its own (a request
// it refused: headers too large, malformed, timed out; or an answer it
// closes after, wire.Answer.CloseConn), the client may still be sending:
// the rest of a header block past the read buffer, or requests pipelined
// behind the refused one. Closing a socket whose receive queue holds
// unread bytes makes the kernel send a reset instead of a FIN, and a
// client still writing gets EPIPE or ECONNRESET, often before it has read
// the answer that says why (Go's net/http client reports "connection
// broken" and drops the 431 it was sent). So the front shuts down its
// sending side first, which sends the answer's FIN, then reads and throws
// away what the client still sends, until the client closes, for at most
// lingerTime and lingerBytes, and only then closes the socket: the answer
// is the client's to read. nginx does the same (its lingering_close), as
// net/http's server does in its way (closeWriteAndWait).
//
// What a client can pin with it is one connection, still counted against
// the connection cap, and one goroutine, for lingerTime: no more than an
// idle connection holds for server.read_header_timeout.

const (
	// lingerTime bounds how long a closing connection waits for the
	// client's end.
	lingerTime = 2 * time.Second
	// lingerBytes bounds what it reads meanwhile; past it the client is
	// not finishing a request but sending for its own sake.
	lingerBytes = 1 << 20
)

// How a lingering close ended, the label of
// tradergate_client_lingering_closes_total.
const (
	lingerEOF      = iota // the client closed: the clean end
	lingerTimeout         // lingerTime passed
	lingerBytesOut        // lingerBytes read
	lingerError           // a reset, or the connection cut (shutdown)
	numLingerEnds
)

var lingerEndNames = [numLingerEnds]string{"client_closed", "timeout", "bytes", "error"}

// lingerStats counts lingering closes by how they ended.
type lingerStats struct{ ends [numLingerEnds]atomic.Uint64 }

// collectors are the counters of s, one series per end.
func (s *lingerStats) collectors() []prometheus.Collector {
	cs := make([]prometheus.Collector, 0, numLingerEnds)
	for i, name := range lingerEndNames {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tradergate_client_lingering_closes_total",
			Help: "HTTP/1.1 connections the edge closed on its own (a refused request, or an answer with Connection: " +
				"close) after reading what the client still sent, by how the wait ended: client_closed, timeout " +
				"(2 s), bytes (1 MiB read), error (a reset, or the connection cut at shutdown).",
			ConstLabels: prometheus.Labels{"end": name},
		}, func() float64 { return float64(s.ends[i].Load()) }))
	}
	return cs
}

// linger is a front connection's lingering close: asked, by the answer
// that ends the connection, and done, by the first Close after.
type linger struct {
	wanted atomic.Bool
	stats  *lingerStats // nil: not counted (tests)
}

// closeAfter waits, before c's Close, for the client to stop sending:
// it shuts down c's sending side (closeWrite), then reads and discards
// until EOF, lingerTime or lingerBytes. A Close from another goroutine
// meanwhile (the drain's cut) is not held up: wanted is taken here, so
// that Close closes at once, and the read here fails.
func (l *linger) closeAfter(c net.Conn) {
	if !l.wanted.CompareAndSwap(true, false) {
		return
	}
	end := lingerError
	if closeWrite(c) == nil && c.SetReadDeadline(time.Now().Add(lingerTime)) == nil {
		n, err := io.CopyN(io.Discard, c, lingerBytes)
		switch {
		case n == lingerBytes:
			end = lingerBytesOut
		case err == io.EOF:
			end = lingerEOF
		case errors.Is(err, os.ErrDeadlineExceeded):
			end = lingerTimeout
		}
	}
	if l.stats != nil {
		l.stats.ends[end].Add(1)
	}
}

// lingerOnClose asks c, a front connection, to linger when it is next
// closed. Connections of other kinds (a test's pipe) close as they are.
func lingerOnClose(c net.Conn) {
	switch c := c.(type) {
	case *frontConn:
		c.linger.wanted.Store(true)
	case *frontTLSConn:
		c.linger.wanted.Store(true)
	}
}

// closeWrite ends c's sending side: the TCP FIN; under TLS, TLS's
// close_notify, then the FIN of the connection under it, where it has
// one (close_notify alone says the answer has ended).
func closeWrite(c net.Conn) error {
	tc, isTLS := c.(*tls.Conn)
	if isTLS {
		if err := tc.CloseWrite(); err != nil {
			return err
		}
		c = tc.NetConn()
	}
	switch cw, ok := c.(interface{ CloseWrite() error }); {
	case ok:
		return cw.CloseWrite()
	case isTLS:
		return nil
	}
	return errors.ErrUnsupported
}
