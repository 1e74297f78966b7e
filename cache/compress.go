package cache

import (
	"bytes"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// Compression levels. A fresh page is compressed again every TTL (a second)
// for as long as its key is read, an immutable one once a day: the fresh
// level buys speed, the immutable level bytes. On a 400 KB order book page
// (BenchmarkCompress) klauspost's level 1 takes about half the time of level
// 6 for an output ~10% larger.
const (
	gzipLevelFresh     = gzip.BestSpeed
	gzipLevelImmutable = gzip.DefaultCompression
)

// compressor makes the gzip copy of a page. Writers and buffers are pooled:
// a gzip writer holds hundreds of KiB of state, too much to allocate per
// insert. The pools live in the Cache, not in package variables (STYLE.md
// "Avoid").
type compressor struct {
	fresh, immutable sync.Pool // *gzip.Writer of each level
	buffers          sync.Pool // *bytes.Buffer
}

// gzip returns body compressed, in a slice of exactly its length (the store
// charges what it holds), or nil when compression does not shrink the body:
// serving the identity body is then as good and costs no bytes.
func (z *compressor) gzip(body []byte, immutable bool) []byte {
	buf, _ := z.buffers.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	defer func() {
		buf.Reset()
		z.buffers.Put(buf)
	}()
	pool, level := &z.fresh, gzipLevelFresh
	if immutable {
		pool, level = &z.immutable, gzipLevelImmutable
	}
	w, _ := pool.Get().(*gzip.Writer)
	if w == nil {
		// The level is a valid constant: NewWriterLevel cannot fail.
		w, _ = gzip.NewWriterLevel(buf, level)
	} else {
		w.Reset(buf)
	}
	defer pool.Put(w)
	// Writes to a bytes.Buffer do not fail.
	_, _ = w.Write(body)
	_ = w.Close()
	if buf.Len() >= len(body) {
		return nil
	}
	return bytes.Clone(buf.Bytes())
}
