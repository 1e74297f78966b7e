package proxy

import (
	"bytes"
	"io"
	"net"
	"os"
	"syscall"
)

// fileBody is the body of an answer sent from a page file of the cache
// (cache/files.go) by sendfile(2), straight from the file to the client's
// socket: the kernel sends the file's pages without copying them into
// socket buffers first, as a write of the page from the heap must. The
// header block has gone out already (ImmediateHeaderFlush); fasthttp calls
// WriteTo for the body, because fileBody says it supports it
// (fasthttp.BodyWriterTo).
//
// From newFileBody until the page is sent (or the body closed) the socket
// is corked (TCP_CORK, Linux), so that the header block leaves with the
// file's first bytes in full segments rather than alone in one more
// segment per answer (docs/BENCHMARKS.md). The cork is pulled as soon as
// the last byte is queued; the kernel's own 200 ms ceiling on a cork is
// the worst a lost Close could cost.
//
// The file is read at explicit offsets and never through its own offset,
// so any number of answers send one file at once. Control holds the file
// open while it is sent: the cache closes a page's file when the page
// leaves it, and that close waits for the answers sending it. An answer
// that finds it closed already writes the same bytes from memory.
type fileBody struct {
	f *os.File
	// raw is the client's socket, nil if conn has none (then the page
	// goes through fasthttp's writer from the heap).
	raw    syscall.RawConn
	corked bool
	// page holds the page's bytes, which the file holds: its Read serves
	// a caller of fasthttp that reads a body stream rather than writing
	// it (none in the edge today), its WriteTo the heap fallback.
	page bytes.Reader
}

// newFileBody corks conn: call it before fasthttp writes the header block.
func newFileBody(f *os.File, conn net.Conn, body []byte) *fileBody {
	b := &fileBody{f: f}
	if sc, ok := conn.(syscall.Conn); ok {
		b.raw, _ = sc.SyscallConn()
	}
	b.page.Reset(body)
	b.cork()
	return b
}

// Close uncorks the socket if WriteTo did not: fasthttp closes a body
// stream when the answer is written, failed or dropped.
func (b *fileBody) Close() error {
	b.uncork()
	return nil
}

// SupportsBodyWriteTo tells fasthttp to send the body with WriteTo.
func (b *fileBody) SupportsBodyWriteTo() bool { return true }

func (b *fileBody) Read(p []byte) (int, error) { return b.page.Read(p) }

// writeHeap writes the page's bytes through w.
func (b *fileBody) writeHeap(w io.Writer) (int64, error) { return b.page.WriteTo(w) }
