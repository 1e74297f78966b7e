package proxy

import (
	"bytes"
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
// that finds it closed already writes the same bytes from memory.
type fileBody struct {
	f    *os.File
	conn net.Conn
	// page holds the page's bytes, which the file holds: its Read serves
	// a caller of fasthttp that reads a body stream rather than writing
	// it (none in the edge today), its WriteTo the heap fallback.
	page bytes.Reader
}

func newFileBody(f *os.File, conn net.Conn, body []byte) *fileBody {
	b := &fileBody{f: f, conn: conn}
	b.page.Reset(body)
	return b
}

// SupportsBodyWriteTo tells fasthttp to send the body with WriteTo.
func (b *fileBody) SupportsBodyWriteTo() bool { return true }

func (b *fileBody) Read(p []byte) (int, error) { return b.page.Read(p) }

// writeHeap writes the page's bytes through w.
func (b *fileBody) writeHeap(w io.Writer) (int64, error) { return b.page.WriteTo(w) }
