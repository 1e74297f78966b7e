package cache

import (
	"sync"
	"sync/atomic"
	"time"
)

// The forms of a page. A page is stored in the form it arrived in: identity
// from a fetch, gzip from the shared tier (l2.go). The other form is made on
// the first hit that wants it, once per entry (a sync.Once per form), and
// charged to the store from then on: a miss does not pay for a gzip copy
// that no client may ask for. A page at or below compress_min_bytes, or one
// that gzip does not shrink, never gets one.

// forms are the bodies of an Entry and what it needs to make and charge
// the missing one.
type forms struct {
	idOnce, gzOnce sync.Once
	// id and gz are written once, inside their Once, and read after it.
	id, gz []byte
	// idLen is the length of the identity body while only gz is held.
	idLen int
	c     *Cache

	// Set by store.put before the entry is published, never after: the
	// store holding the entry (nil when it is not stored, as for BYPASS),
	// its key, and the wall-clock expiry given to ristretto.
	home    *store
	key     string
	expires time.Time
	// cost is the bytes charged to the store (store.go); it grows when a
	// form or a page file is made.
	cost atomic.Int64
	// holds counts the times the store handed the entry to ristretto
	// (put, grow) that ristretto has not given back (OnExit): above zero,
	// the store still holds it (store.go).
	holds atomic.Int32

	// The page files of the two forms (files.go).
	idFile, gzFile pageFile
}

// Body returns the identity body. For a page from the shared tier it is
// inflated on the first call. It is nil only if that inflation fails, which
// the checksum of shared values rules out short of a bug in their writer;
// the entry is then dropped from the store and counted as corrupt.
func (e *Entry) Body() []byte {
	e.idOnce.Do(e.inflate)
	return e.id
}

// GzipBody returns the gzip form of the page, made on the first call, or nil
// when there is none: the page is at most compress_min_bytes long, gzip does
// not shrink it, or compression is off.
func (e *Entry) GzipBody() []byte {
	e.gzOnce.Do(e.deflate)
	return e.gz
}

// newForms sets the forms a page arrives with; a nil form is made on
// demand, except a gzip copy when compress is false.
func (c *Cache) newForms(e *Entry, id, gz []byte, idLen int, compress bool) {
	e.c, e.id, e.gz, e.idLen = c, id, gz, idLen
	if id != nil {
		e.idOnce.Do(func() {})
	}
	if gz != nil || !compress {
		e.gzOnce.Do(func() {})
	}
}

func (e *Entry) deflate() {
	// Only an entry holding its identity body gets here (newForms).
	if gz := e.c.z.gzip(e.id); gz != nil {
		e.gz = gz
		e.charge(int64(cap(gz)))
	}
}

func (e *Entry) inflate() {
	id, err := e.c.z.gunzip(e.gz, e.idLen, e.ETag)
	if err != nil {
		e.c.stats.l2Corrupt.Add(1)
		e.c.log.Error("cache: a shared page does not inflate; dropped", "error", err)
		if e.home != nil {
			e.home.drop(e)
		}
		return
	}
	e.id = id
	e.charge(int64(cap(id)))
}

// charge adds n bytes to the cost of a stored entry.
func (e *Entry) charge(n int64) {
	if e.home != nil {
		e.home.grow(e, n)
	}
}
