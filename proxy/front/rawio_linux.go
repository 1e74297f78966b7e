package front

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// rawIO reads and writes a client's socket with raw system calls
// (syscall.RawSyscall) under the socket's own poller (syscall.RawConn),
// rather than through net.Conn's, which enters each call as a system call
// that may block (runtime.entersyscall). The socket is non-blocking, so
// neither call ever waits in the kernel: a read with nothing to read and a
// write the socket has no room for return EAGAIN, and RawConn waits for
// the poller as net.Conn does, within the connection's deadlines.
//
// What that spares is the runtime's monitor thread (sysmon). It sleeps
// while every P is idle, and each blocking-style system call wakes it
// (a futex wake, then a thread of the process's on the CPU the edge
// serves from for the tens of microseconds sysmon then polls). A front
// whose requests come one at a time, each after the P went idle, paid
// that on every request: about 6% of its CPU at a fixed rate
// (docs/BENCHMARKS.md, "Fixed rate: handlers on kept goroutines, raw
// socket calls"). A raw call is never
// handed off to another thread while in the kernel, which a call that
// does not wait has no use for.
//
// One rawIO is one connection's: the calls' arguments and results live in
// it, and its functions are made once, so a call allocates nothing. A
// read, and a write, hold its lock for the call, as the socket's own locks
// would hold a second one anyway (net.Conn allows calls at once).
type rawIO struct {
	rc syscall.RawConn
	// nc is the connection, for its addresses in errors.
	nc net.Conn

	rmu     sync.Mutex
	rbuf    []byte
	rn      int
	rerr    syscall.Errno
	readFn  func(fd uintptr) bool
	wmu     sync.Mutex
	wbuf    []byte
	wn      int
	werr    syscall.Errno
	writeFn func(fd uintptr) bool
}

// newRawIO returns nc's raw I/O, or nil when nc has no socket to use so.
func newRawIO(nc net.Conn) *rawIO {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &rawIO{rc: rc, nc: nc}
	r.readFn, r.writeFn = r.readOnce, r.writeSome
	return r
}

// readOnce makes one read; false (EAGAIN): wait for the socket.
func (r *rawIO) readOnce(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(r.rbuf))), uintptr(len(r.rbuf)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		r.rn, r.rerr = int(n), e
		return true
	}
}

// writeSome writes what it can of wbuf; false: the socket has no room,
// wait.
func (r *rawIO) writeSome(fd uintptr) bool {
	for r.wn < len(r.wbuf) {
		p := r.wbuf[r.wn:]
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
		switch e {
		case 0:
			r.wn += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			r.werr = e
			return true
		}
	}
	return true
}

// Read is net.Conn's Read: io.EOF once the peer has closed, the poller's
// error (a deadline passed, the connection closed) as net.Conn gives it.
func (r *rawIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.rmu.Lock()
	r.rbuf, r.rn, r.rerr = p, 0, 0
	err := r.rc.Read(r.readFn)
	n, errno := r.rn, r.rerr
	r.rbuf = nil
	r.rmu.Unlock()
	switch {
	case err != nil:
		return 0, r.opError("read", err)
	case errno != 0:
		return 0, r.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write is net.Conn's Write: all of p, or an error.
func (r *rawIO) Write(p []byte) (int, error) {
	r.wmu.Lock()
	r.wbuf, r.wn, r.werr = p, 0, 0
	err := r.rc.Write(r.writeFn)
	n, errno := r.wn, r.werr
	r.wbuf = nil
	r.wmu.Unlock()
	switch {
	case err != nil:
		return n, r.opError("write", err)
	case errno != 0:
		return n, r.opError("write", os.NewSyscallError("write", errno))
	}
	return n, nil
}

// readOr reads p through r, or through c when r is nil (a connection
// without a socket of its own).
func (r *rawIO) readOr(c net.Conn, p []byte) (int, error) {
	if r == nil {
		return c.Read(p)
	}
	return r.Read(p)
}

// writeOr writes p through r, or through c when r is nil.
func (r *rawIO) writeOr(c net.Conn, p []byte) (int, error) {
	if r == nil {
		return c.Write(p)
	}
	return r.Write(p)
}

// opError wraps err as net.Conn's methods do, so that callers reading it
// (a timeout, a closed connection) see what they would have.
func (r *rawIO) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: r.nc.LocalAddr(), Addr: r.nc.RemoteAddr(), Err: err}
}
