package proxy

import (
	"io"
	"net"
	"os"
)

// fileBody is the body of an answer sent from a page file of the cache
// (cache/files.go) by sendfile(2), straight from the file to the client's
// socket: the kernel sends the file's pages without copying them into
// socket buffers first, as a write of the page from the heap must. The
// header block has gone out already (ImmediateHeaderFlush); fasthttp calls
// WriteTo for the body, because fileBody says it supports it
// (fasthttp.BodyWriterTo).
//
// The file is read at explicit offsets and never through its own offset,
// so any number of answers send one file at once. Control holds the file
// open while it is sent: the cache closes a page's file when the page
// leaves it, and that close waits for the answers sending it. An answer
// that finds it closed already writes the same bytes from body.
type fileBody struct {
	f    *os.File
	conn net.Conn
	body []byte // the page's bytes, which the file holds
	read int    // what Read handed out
}

// SupportsBodyWriteTo tells fasthttp to send the body with WriteTo.
func (b *fileBody) SupportsBodyWriteTo() bool { return true }

func (b *fileBody) writeHeap(w io.Writer) (int64, error) {
	n, err := w.Write(b.body)
	return int64(n), err
}

// Read hands out the page's bytes, for a caller of fasthttp that reads a
// body stream rather than writing it (none in the edge today).
func (b *fileBody) Read(p []byte) (int, error) {
	if b.read >= len(b.body) {
		return 0, io.EOF
	}
	n := copy(p, b.body[b.read:])
	b.read += n
	return n, nil
}
