package front

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
// The header block is held back for the file's first bytes, so that it
// leaves with them in full segments rather than alone in one more segment
// per answer: newFileBody has the front connection send its next write
// (fasthttp's flush of the header block) with MSG_MORE (Linux), and
// sendfile's last bytes push everything out: two system calls per answer,
// header and file, as nginx sends its cache files (docs/BENCHMARKS.md). An
// answer whose page is never sent pushes the held block in Close; the
// kernel's own probe timer (about 200 ms) is the worst a lost Close could
// cost.
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
	raw syscall.RawConn
	// conn is the front connection holding the header block back, nil
	// for any other; sent is set once the page (or its heap copy) went
	// after the block, which then pushed it.
	conn *frontConn
	sent bool
	// page holds the page's bytes, which the file holds: its Read serves
	// a caller of fasthttp that reads a body stream rather than writing
	// it (none in the edge today), its WriteTo the heap fallback.
	page bytes.Reader
}

// newFileBody has a front connection hold its next write (the header
// block) for the page: call it before fasthttp writes that block.
func newFileBody(f *os.File, conn net.Conn, body []byte) *fileBody {
	b := &fileBody{f: f}
	if sc, ok := conn.(syscall.Conn); ok {
		b.raw, _ = sc.SyscallConn()
	}
	if fc, ok := conn.(*frontConn); ok && b.raw != nil {
		b.conn = fc
		fc.more = true
	}
	b.page.Reset(body)
	return b
}

// Close pushes out a header block held for a page that was never sent:
// fasthttp closes a body stream when the answer is written, failed or
// dropped.
func (b *fileBody) Close() error {
	if b.conn != nil {
		b.conn.more = false // the block was never written
		if !b.sent {
			// An error here is a closed connection: nothing is left to push.
			_ = b.raw.Control(push)
		}
		b.conn = nil
	}
	return nil
}

// SupportsBodyWriteTo tells fasthttp to send the body with WriteTo.
func (b *fileBody) SupportsBodyWriteTo() bool { return true }

func (b *fileBody) Read(p []byte) (int, error) { return b.page.Read(p) }

// writeHeap writes the page's bytes through w, whose flush, a write
// without MSG_MORE, pushes out the header block held before them.
func (b *fileBody) writeHeap(w io.Writer) (int64, error) {
	n, err := b.page.WriteTo(w)
	b.sent = err == nil
	return n, err
}
