package main

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// scmTimestampingLen is struct scm_timestamping's size: three timespecs,
// the first the software timestamp (the other two hardware ones).
const scmTimestampingLen = 3 * int(unsafe.Sizeof(unix.Timespec{}))

// enableRxTimestamps turns on the kernel's software receive timestamps
// of conn's socket, and returns the socket to read with recvmsg and a
// buffer for the control message.
func enableRxTimestamps(conn net.Conn) (syscall.RawConn, []byte, error) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil, nil, errors.New("not a socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPING,
			unix.SOF_TIMESTAMPING_RX_SOFTWARE|unix.SOF_TIMESTAMPING_SOFTWARE)
	}); err != nil {
		return nil, nil, err
	}
	if serr != nil {
		return nil, nil, os.NewSyscallError("setsockopt SO_TIMESTAMPING", serr)
	}
	return raw, make([]byte, unix.CmsgSpace(scmTimestampingLen)), nil
}

// Read reads with recvmsg through Go's poller (an EAGAIN waits for the
// socket), and keeps the software receive timestamp that comes with
// the bytes, or the time the read returned when none does.
func (c *stampedConn) Read(p []byte) (int, error) {
	if c.raw == nil {
		n, err := c.Conn.Read(p)
		c.at, c.kernel = time.Now().UnixNano(), false
		return n, err
	}
	var n, oobn int
	var rerr error
	err := c.raw.Read(func(fd uintptr) bool {
		for {
			n, oobn, _, _, rerr = unix.Recvmsg(int(fd), p, c.oob, 0)
			if rerr != unix.EINTR {
				return rerr != unix.EAGAIN
			}
		}
	})
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, os.NewSyscallError("recvmsg", rerr)
	case n == 0 && len(p) > 0:
		return 0, io.EOF
	}
	c.at, c.kernel = rxTimestamp(c.oob[:oobn])
	if !c.kernel {
		c.at = time.Now().UnixNano()
	}
	return n, nil
}

// rxTimestamp is the software receive timestamp in a read's control
// messages, in Unix nanoseconds; false when there is none.
func rxTimestamp(oob []byte) (int64, bool) {
	if len(oob) == 0 {
		return 0, false
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_SOCKET || m.Header.Type != unix.SCM_TIMESTAMPING || len(m.Data) < scmTimestampingLen {
			continue
		}
		var ts unix.Timespec
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&ts)), unsafe.Sizeof(ts)), m.Data)
		if ts.Sec == 0 && ts.Nsec == 0 {
			return 0, false
		}
		return ts.Nano(), true
	}
	return 0, false
}
