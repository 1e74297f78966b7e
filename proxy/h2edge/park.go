package h2edge

import (
	"crypto/tls"
	"net"
	"runtime/debug"
	"syscall"
	"time"
)

// An idle connection costs its read loop's goroutine, whose stack the
// runtime keeps at the size the goroutine grew to: reading a frame through
// crypto/tls (its record layer, bytes.Buffer's ReadFrom, the poller) takes
// it to 4 KiB, and a collection halves a stack only when less than a
// quarter of it, counting a fixed 800 bytes, is in use, which no read loop
// waiting in a read ever is. So the read loop does not wait on the
// goroutine that holds the connection while it idles: once the connection
// has been quiet for parkAfter (no frame read; a timeout of the read
// under way, which leaves what crypto/tls read of a record for the next
// read), the loop's goroutine ends, and serve's own, which runs nothing
// deeper than this wait and so keeps a new goroutine's 2 KiB stack, waits
// for the socket to become readable without reading. Then the loop runs
// again on a new goroutine. A busy connection never parks; one quiet for
// parkAfter costs a goroutine's start and a system call (MSG_PEEK) when it
// wakes (docs/BENCHMARKS.md, "Idle HTTP/2 connections: the read loop
// parks").

// parkAfter is how long a connection is quiet before its read loop parks.
const parkAfter = time.Second

// The stack a parked loop's goroutine gave back, and what its connection
// let go of, return to the heap only at a collection, and to the system
// after it; an idle process runs none (Go forces one every two minutes).
// So once parkFreeMin connections have parked (at least 4 MiB of stacks)
// and none has for parkQuiet, the server has the runtime collect and
// return what is free (debug.FreeOSMemory), at most once every
// parkFreeEvery: a client that opens and idles connections in bursts
// costs a collection a minute at most.
const (
	parkFreeMin   = 1024
	parkQuiet     = 2 * time.Second
	parkFreeEvery = time.Minute
)

// socketOf is the socket under nc (a TLS connection over it, or the
// connection itself), or nil: a connection of another kind does not park.
func socketOf(nc net.Conn) syscall.RawConn {
	if !canWaitReadable {
		return nil
	}
	if t, ok := nc.(*tls.Conn); ok {
		nc = t.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// serveParked runs the read loop on goroutines of its own, and waits for
// the socket to become readable while it is parked.
func (c *conn) serveParked() error {
	var (
		park bool
		err  error
	)
	first, werr := true, error(nil)
	for {
		ended := make(chan struct{})
		go func() {
			park, err = c.loop(first, werr)
			close(ended)
		}()
		<-ended
		if !park {
			return err
		}
		first = false
		// The deadline in force is the connection's own (parkNow): an
		// idle connection ends, a wake-up (Shutdown) ends the wait, and
		// so does Close.
		werr = c.sock.Read(readable)
		c.resumed = time.Now()
	}
}

// parkDeadline is when the read loop parks: parkAfter after the
// connection's last activity or its last wake-up, whichever is later.
func (c *conn) parkDeadline() time.Time {
	last := c.idleAt.Add(-c.idle)
	if c.resumed.After(last) {
		last = c.resumed
	}
	return last.Add(parkAfter)
}

// parkNow: the read loop ended with err, the timeout of the park
// deadline, between frames; the connection's own deadline is set for the
// wait.
func (c *conn) parkNow(err error) bool {
	if !c.parking || c.rd.midFrame() || c.rd.Buffered() > 0 || !isTimeout(err) || c.quitting.Load() {
		return false
	}
	// What the loop makes again as it resumes: the framer, and the
	// streams' map once empty, which keeps the room it grew to.
	c.fr = nil
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.streams) == 0 {
		c.streams = nil
	}
	c.deadline = c.dueLocked()
	c.parking = false
	c.nc.SetReadDeadline(c.deadline)
	// The header block's room for fields is made again too.
	c.hb.fields = nil
	// Shutdown's wake-up (a deadline of now) may have come since the park
	// deadline was set, and been overwritten.
	c.wakeIfQuietLocked()
	c.srv.parked()
	return true
}

// parked counts a connection that parked, and sets the timer that
// returns memory once enough have.
func (s *Server) parked() {
	s.parkMu.Lock()
	defer s.parkMu.Unlock()
	s.parks++
	s.lastPark = time.Now()
	if s.parks >= parkFreeMin && s.freeTimer == nil {
		s.freeTimer = time.AfterFunc(parkQuiet, s.freeParked)
	}
}

// freeParked returns memory to the system once no connection has parked
// for parkQuiet and none was returned for parkFreeEvery.
func (s *Server) freeParked() {
	s.parkMu.Lock()
	now := time.Now()
	wait := parkQuiet - now.Sub(s.lastPark)
	if !s.lastFree.IsZero() {
		wait = max(wait, parkFreeEvery-now.Sub(s.lastFree))
	}
	if wait > 0 {
		s.freeTimer.Reset(wait)
		s.parkMu.Unlock()
		return
	}
	s.freeTimer = nil
	s.parks = 0
	s.lastFree = now
	s.parkMu.Unlock()
	if !s.closed() {
		debug.FreeOSMemory()
		if s.MemoryReturned != nil {
			s.MemoryReturned()
		}
	}
}

// isTimeout: err is a read that timed out.
func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
