package proxy

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// WriteTo sends the page to the connection, bypassing w (fasthttp's
// buffered writer, empty after the header flush), and uncorks it after the
// last byte; when the file cannot be sent, it uncorks first and the bytes
// go through w.
func (b *fileBody) WriteTo(w io.Writer) (int64, error) {
	out := b.raw
	if out == nil {
		return b.writeHeap(w)
	}
	in, err := b.f.SyscallConn()
	if err != nil {
		b.uncork()
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
			// Here, with the socket's descriptor at hand, not through
			// another Control. On a failed send the cork stays for
			// Close: the connection is closed after it anyway.
			b.uncorkFD(outfd)
			return true
		})
		if sendErr == nil {
			sendErr = werr
		}
	})
	if ctlErr != nil {
		// Closed: the page left the cache after this answer took its
		// file. Nothing has been sent yet.
		b.uncork()
		return b.writeHeap(w)
	}
	return sent, sendErr
}

var errShortFile = errors.New("page file shorter than its page")

func (b *fileBody) cork() {
	if b.raw == nil {
		return
	}
	_ = b.raw.Control(func(fd uintptr) {
		// A socket that cannot be corked sends the header block alone.
		b.corked = setCork(fd, 1) == nil
	})
}

func (b *fileBody) uncork() {
	if b.corked {
		// An error here is a closed connection: nothing is left to push.
		_ = b.raw.Control(b.uncorkFD)
	}
}

// uncorkFD pulls the cork, if set, off the socket fd.
func (b *fileBody) uncorkFD(fd uintptr) {
	if b.corked {
		b.corked = false
		_ = setCork(fd, 0)
	}
}

func setCork(fd uintptr, on int) error {
	return unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_CORK, on)
}
