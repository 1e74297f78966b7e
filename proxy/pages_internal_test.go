package proxy

import (
	"testing"
	"time"
	"unsafe"

	"tradergate/cache"
)

// The note an entry keeps (hitFields) must fit what the cache charges
// for it, however long the page lives: the longest values are those of a
// page held for decades, immutable, long stale.
func TestHitFieldsFitNote(t *testing.T) {
	stored := time.Unix(1_800_000_000, 0)
	e := &cache.Entry{Stored: stored, TTL: 99 * 365 * 24 * time.Hour, Immutable: true}
	for _, at := range []struct {
		status cache.Status
		now    time.Time
	}{
		{cache.Hit, stored.Add(e.TTL - 1500*time.Millisecond)},
		{cache.Stale, stored.Add(2 * e.TTL)},
	} {
		f := hitFieldsOf(e, at.status, ageNumbersOf(e, at.now))
		// The string's bytes in their size class, at most 16 B over.
		if n := int(unsafe.Sizeof(*f)) + len(f.values) + 16; n > cache.NoteBytes {
			t.Errorf("%v: a note takes about %d B (%q), cache.NoteBytes is %d", at.status, n, f.values, cache.NoteBytes)
		}
		if e.Note() != f {
			t.Errorf("%v: the fields were not kept as the entry's note", at.status)
		}
	}
}
