package cache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"

	"tradergate/internal/poison"
)

// gzipLevel is klauspost's fastest for every page: a fresh page is
// compressed again every TTL for as long as its key is read, and the first
// gzip hit of an entry pays for it, so speed wins over a slightly smaller
// copy (docs/BENCHMARKS.md).
const gzipLevel = gzip.BestSpeed

// compressor makes the gzip copy of a page, and the identity body of a page
// that arrived gzip only. Writers, readers and buffers are pooled: a gzip
// writer holds hundreds of KiB of state, too much to allocate per page. The
// pools live in the Cache, not in package variables.
type compressor struct {
	writers sync.Pool // *gzip.Writer
	readers sync.Pool // *gzip.Reader
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
		if poison.On {
			p := buf.Bytes()
			poison.Fill(p[:cap(p)])
		}
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

// gunzip inflates gz, whose identity body is n bytes long with the given
// ETag, into a slice of exactly n bytes. The ETag check catches a stream
// that inflates cleanly to other bytes.
func (z *compressor) gunzip(gz []byte, n int, etag string) ([]byte, error) {
	src := bytes.NewReader(gz)
	r, _ := z.readers.Get().(*gzip.Reader)
	var err error
	if r == nil {
		r, err = gzip.NewReader(src)
	} else {
		err = r.Reset(src)
	}
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	defer z.readers.Put(r)
	out := make([]byte, n)
	if _, err := io.ReadFull(r, out); err != nil {
		return nil, fmt.Errorf("gunzip %d bytes: %w", n, err)
	}
	// Reading past the end checks gzip's CRC and length trailer.
	var more [1]byte
	if k, err := r.Read(more[:]); k != 0 || !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("gunzip: more than %d bytes, or a bad trailer (%v)", n, err)
	}
	if id, _ := etags(out); id != etag {
		return nil, errors.New("gunzip: the body does not match its ETag")
	}
	return out, nil
}
