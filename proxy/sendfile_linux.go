package proxy

import (
	"errors"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// WriteTo sends the page to the connection, bypassing w (fasthttp's
// buffered writer, empty after the header flush), except when the file
// cannot be sent, when the bytes go through w.
func (b *fileBody) WriteTo(w io.Writer) (int64, error) {
	sc, ok := b.conn.(syscall.Conn)
	if !ok {
		return b.writeHeap(w)
	}
	out, err := sc.SyscallConn()
	if err != nil {
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
