//go:build !linux

package front

import (
	"io"
	"net"
)

// WriteTo writes the page from memory: page files are Linux only, and the
// cache makes none elsewhere (cache/files.go).
func (b *fileBody) WriteTo(w io.Writer) (int64, error) { return b.writeHeap(w) }

// push and sendMore hold nothing back: MSG_MORE is Linux's, and no page is
// sent from a file elsewhere.
func push(fd uintptr) {}

func sendMore(c *net.TCPConn, p []byte) (int, error) { return c.Write(p) }
