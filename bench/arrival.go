package main

import (
	"net"
	"syscall"
)

// A subscriber's arrival time is when an event's bytes reached its
// socket, not when its reader goroutine got to run: the harness's
// 10,000 readers share one CPU with its recorder and the simulated host,
// and the time a reader waits for that CPU is the harness's own, not the
// server's hand-off. On Linux the subscriber's TCP socket reports the
// kernel's software receive timestamp with each read (SO_TIMESTAMPING,
// SOF_TIMESTAMPING_RX_SOFTWARE): for TCP the timestamp of the last
// segment the read consumed, which on loopback is taken as the server's
// write hands the segment to the loopback device. The servers write each
// batch of events in one write, so an event's arrival is the timestamp
// of the read that brought its last byte. Elsewhere, or when the kernel
// gives none, the arrival is the time the read returned. The kernel
// switches its stamping on in deferred work when the first socket asks,
// so a point's first segments may come unstamped; its window begins
// seconds later.

// arrivalClock tells when the bytes of a reader's last read arrived.
type arrivalClock interface {
	// arrival is that time in Unix nanoseconds, and whether it is the
	// kernel's receive timestamp (else the time the read returned).
	arrival() (ns int64, kernel bool)
}

// stampedConn is a subscriber's connection whose reads keep the arrival
// of their bytes (Read: arrival_linux.go, arrival_other.go).
type stampedConn struct {
	net.Conn
	raw syscall.RawConn // nil: plain reads, the arrival their return
	oob []byte          // the control messages of a read
	at  int64
	// kernel: at is the kernel's receive timestamp.
	kernel bool
}

func (c *stampedConn) arrival() (int64, bool) { return c.at, c.kernel }

// stampArrivals wraps conn so that its reads keep their bytes' arrival;
// the error tells why the kernel's timestamps are off (the reads then
// keep the time they returned).
func stampArrivals(conn net.Conn) (*stampedConn, error) {
	c := &stampedConn{Conn: conn}
	raw, oob, err := enableRxTimestamps(conn)
	if err == nil {
		c.raw, c.oob = raw, oob
	}
	return c, err
}
