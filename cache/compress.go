package cache

import (
	"bytes"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// gzipLevel is klauspost's level 1 for every page. A fresh page is
// compressed again every TTL (a second) for as long as its key is read, so
// speed wins there; an immutable page is compressed once a day, which made
// level 6 tempting, but the compression is paid on the miss itself: the
// bench harness (issue 8) measured the gzip copy at 20% of a miss's CPU at
// level 6, and level 1 takes about half that time for an output ~10%
// larger (BenchmarkCompress on a 400 KB order book page).
const gzipLevel = gzip.BestSpeed

// compressor makes the gzip copy of a page. Writers and buffers are pooled:
// a gzip writer holds hundreds of KiB of state, too much to allocate per
// insert. The pools live in the Cache, not in package variables (STYLE.md
// "Avoid").
type compressor struct {
	writers sync.Pool // *gzip.Writer
	buffers sync.Pool // *bytes.Buffer
}

// gzip returns body compressed, in a slice of exactly its length (the store
// charges what it holds), or nil when compression does not shrink the body:
// serving the identity body is then as good and costs no bytes.
func (z *compressor) gzip(body []byte) []byte {
	buf, _ := z.buffers.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	defer func() {
		buf.Reset()
		z.buffers.Put(buf)
	}()
	w, _ := z.writers.Get().(*gzip.Writer)
	if w == nil {
		// The level is a valid constant: NewWriterLevel cannot fail.
		w, _ = gzip.NewWriterLevel(buf, gzipLevel)
	} else {
		w.Reset(buf)
	}
	defer z.writers.Put(w)
	// Writes to a bytes.Buffer do not fail.
	_, _ = w.Write(body)
	_ = w.Close()
	if buf.Len() >= len(body) {
		return nil
	}
	return bytes.Clone(buf.Bytes())
}
