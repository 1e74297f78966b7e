package front

import (
	"errors"
	"io"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// WriteTo sends the page to the connection, bypassing w (fasthttp's
// buffered writer, empty after the header flush); sendfile's last bytes
// go out without MSG_MORE and push the held header block with them. When
// the file cannot be sent, the bytes go through w.
//
// sendfile is an ordinary system call here, not a raw one as the front's
// socket reads and writes are (rawio_linux.go): the page file lives on a
// disk (sendfile_dir), and reading it may wait on the disk, during which
// the scheduler must be free to run other goroutines on the P.
func (b *fileBody) WriteTo(w io.Writer) (int64, error) {
	out := b.raw
	if out == nil {
		return b.writeHeap(w)
	}
	in, err := b.f.SyscallConn()
	if err != nil {
		return b.writeHeap(w)
	}
	var sent int64
	var sendErr error
	size := b.page.Size()
	ctlErr := in.Control(func(infd uintptr) {
		// Write waits for the socket to take more (EAGAIN), within the
		// connection's write deadline, and returns its error.
		werr := out.Write(func(outfd uintptr) bool {
			for sent < size {
				off := sent
				n, err := unix.Sendfile(int(outfd), int(infd), &off, int(size-sent))
				sent = off
				switch {
				case err == unix.EAGAIN:
					return false
				case err == unix.EINTR:
				case err != nil:
					sendErr = os.NewSyscallError("sendfile", err)
					return true
				case n == 0:
					// The file ended early: only a bug gets here (the
					// file is unnamed, and only the cache writes it).
					sendErr = errShortFile
					return true
				}
			}
			b.sent = true
			return true
		})
		if sendErr == nil {
			sendErr = werr
		}
	})
	if ctlErr != nil {
		// Closed: the page left the cache after this answer took its
		// file. Nothing has been sent yet.
		return b.writeHeap(w)
	}
	return sent, sendErr
}

var errShortFile = errors.New("page file shorter than its page")

// push sends what the socket fd holds back: turning TCP_NODELAY on (it is
// on already, as Go sets it) pushes pending segments out.
func push(fd uintptr) {
	_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
}

// sendMore writes p to c with MSG_MORE: the kernel holds a partial
// segment back for the next write, within c's write deadline.
func sendMore(c *net.TCPConn, p []byte) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return c.Write(p)
	}
	var n int
	var sendErr error
	werr := raw.Write(func(fd uintptr) bool {
		for n < len(p) {
			m, err := unix.SendmsgN(int(fd), p[n:], nil, nil, unix.MSG_MORE)
			switch {
			case err == unix.EAGAIN:
				return false
			case err == unix.EINTR:
			case err != nil:
				sendErr = os.NewSyscallError("sendmsg", err)
				return true
			default:
				n += m
			}
		}
		return true
	})
	if sendErr == nil {
		sendErr = werr
	}
	return n, sendErr
}
