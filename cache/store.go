package cache

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/dgraph-io/ristretto/v2"
)

// The L1 store: ristretto, bounded in bytes. An entry is charged what it
// holds: its forms (forms.go), its key and entryOverhead, which counts
// ristretto's own record (hence IgnoreInternalCost). A Set may be refused,
// so a flight hands its entry to its waiters itself, and put keeps it where
// the callers after it find it (see "Settling"). A replacement is a Del
// then a Set (an update in place would not evict for its cost). Growth: a
// form made on a hit is charged by setting the same entry again (a Del would
// drop a hot page); the ledger may pass MaxBytes by such forms until the
// next insert evicts for them. A striped lock per key orders grow and put.

// entryOverhead is the fixed per-entry charge beyond the forms and the key,
// rounded up: the Entry struct (~270 B), its two ETag strings (~60 B),
// ristretto's storeItem (48 B) and its slots in three maps (store, policy
// costs, expiry buckets, ~150 B together). TestEntryOverhead checks it.
const entryOverhead = 672

// avgEntryBytes sizes ristretto's frequency counters: most pages are small
// (lookups ~1 KiB, 20-item pages ~8 KiB), so 2 KiB is a conservative mean.
// ristretto advises 10 counters per entry the cache can hold; each takes
// about 3 bytes, so the counters add ~1.5% to MaxBytes, outside the bound.
const avgEntryBytes = 2 << 10

// Settling. ristretto applies a Set later, on its own goroutine, and until
// then its Get does not find the entry. The page a flight stores must be
// found by the callers after it, or each would start a flight and a legacy
// call of its own. So put keeps the entry in settling, where get finds it,
// until ristretto has applied the set. Waiting for that in put (ristretto's
// Wait) would hand every miss to ristretto's goroutine and back before its
// answer (docs/BENCHMARKS.md, "Settling"): the store's settler goroutine
// waits instead, once for all the puts since its last wait, then lets them
// go. settling is striped like the locks, by the same hash.

type store struct {
	rc *ristretto.Cache[string, *Entry]
	// max is the bound; the check before Set saves ristretto the work of
	// refusing an entry that can never fit.
	max int64

	// settling holds the entries put whose Set ristretto may not have
	// applied yet, by key; get looks here after ristretto. The settler
	// takes them out (settle).
	settling [stripes]struct {
		mu sync.Mutex
		m  map[string]*Entry
	}
	settler struct {
		mu     sync.Mutex
		queued []*Entry // put since the settler's last wait
		woken  bool     // a wake is sent and not yet taken
		wake   chan struct{}
		done   chan struct{}
	}

	// locks order put, grow and drop of one key (see "Growth").
	locks [stripes]sync.Mutex

	evictions, expired, rejected atomic.Uint64
	closing                      atomic.Bool
}

func (s *store) lock(key string) *sync.Mutex { return &s.locks[stripe(key)] }

// stripes is how many locks and settling maps the keys share.
const stripes = 64

// stripe is key's index in locks and settling.
func stripe(key string) uint64 { return xxhash.Sum64String(key) % stripes }

func newStore(maxBytes int64) (*store, error) {
	s := &store{max: maxBytes}
	rc, err := ristretto.NewCache(&ristretto.Config[string, *Entry]{
		NumCounters:        max(10*maxBytes/avgEntryBytes, 1024),
		MaxCost:            maxBytes,
		BufferItems:        64,
		IgnoreInternalCost: true,
		OnEvict:            s.onEvict,
		OnReject:           func(*ristretto.Item[*Entry]) { s.rejected.Add(1) },
		OnExit:             s.onExit,
	})
	if err != nil {
		return nil, err
	}
	s.rc = rc
	for i := range s.settling {
		s.settling[i].m = make(map[string]*Entry)
	}
	s.settler.wake, s.settler.done = make(chan struct{}, 1), make(chan struct{})
	go s.settle()
	return s, nil
}

// onEvict runs in ristretto's single processing goroutine: it only counts
// (callbacks under ristretto's lock stay cheap). The expiry cleanup reports through it
// too; an item past its wall-clock expiration was expired, not evicted.
func (s *store) onEvict(it *ristretto.Item[*Entry]) {
	switch {
	case s.closing.Load():
		// Close empties the store through OnEvict; that is not pressure.
	case it.Value == nil:
		// A victim the flight of its key had deleted already, to replace
		// it (put); its Del was still queued when the policy chose it.
	case !it.Expiration.IsZero() && !it.Expiration.After(time.Now()):
		s.expired.Add(1)
	default:
		s.evictions.Add(1)
	}
}

// onExit runs whenever ristretto lets go of a value: evicted, expired,
// rejected, deleted, or replaced, also with itself when grow sets it again.
// Each gives back one of the entry's holds (put, grow), and an entry whose
// last hold is back has left the store: its page files close (files.go).
// An entry that a grow re-adds after its eviction is then served from the
// heap. The count, not a lookup, says whether the store still holds it:
// ristretto's Get records an access, and a lookup here would count every
// evicted key as read once more, toward its admission again. While
// closing, every entry is leaving.
func (s *store) onExit(e *Entry) {
	if e == nil {
		return
	}
	if e.holds.Add(-1) > 0 && !s.closing.Load() {
		return
	}
	e.closeFiles()
}

// set hands e to ristretto under key, counting the hold it gives (onExit
// gives it back); a set ristretto drops (its buffer full) gives it back
// here. Under the key's lock.
func (s *store) set(key string, e *Entry, cost int64, ttl time.Duration) bool {
	e.holds.Add(1)
	if !s.rc.SetWithTTL(key, e, cost, ttl) {
		s.onExit(e)
		return false
	}
	return true
}

func (s *store) get(key string) *Entry {
	if e, ok := s.rc.Get(key); ok {
		return e
	}
	return s.unapplied(key)
}

// unapplied returns the entry put under key whose set ristretto may not
// have applied yet, or nil.
func (s *store) unapplied(key string) *Entry {
	sh := &s.settling[stripe(key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.m[key]
}

// settleLater keeps e, just set, where get finds it until ristretto has
// applied its set (see "Settling"), and wakes the settler.
func (s *store) settleLater(e *Entry) {
	sh := &s.settling[stripe(e.key)]
	sh.mu.Lock()
	sh.m[e.key] = e
	sh.mu.Unlock()
	st := &s.settler
	st.mu.Lock()
	st.queued = append(st.queued, e)
	wake := !st.woken
	st.woken = true
	st.mu.Unlock()
	if wake {
		st.wake <- struct{}{} // never blocks: one wake at most is pending
	}
}

// unsettle takes e out of settling, unless a later put of its key replaced
// it there.
func (s *store) unsettle(e *Entry) {
	sh := &s.settling[stripe(e.key)]
	sh.mu.Lock()
	if sh.m[e.key] == e {
		delete(sh.m, e.key)
	}
	sh.mu.Unlock()
}

// settle is the settler: woken by a put, it waits until ristretto has
// applied every set queued before the wait, takes those entries out of
// settling, and goes on while more are queued. It ends at close.
func (s *store) settle() {
	st := &s.settler
	defer close(st.done)
	var batch []*Entry
	for range st.wake {
		for {
			st.mu.Lock()
			batch, st.queued = st.queued, batch[:0]
			if len(batch) == 0 {
				st.woken = false
				st.mu.Unlock()
				break
			}
			st.mu.Unlock()
			s.applied()
			for i, e := range batch {
				s.unsettle(e)
				batch[i] = nil // nothing settled stays reachable from here
			}
		}
	}
}

// applied waits until ristretto has applied every set and Del made so
// far: for the settler, for grow, and so that its ledger counts them
// (Stats).
func (s *store) applied() { s.rc.Wait() }

// put stores e under key for ttl, replacing whatever is held. The Del runs
// even when the flight saw no entry: ristretto's Get hides an entry past its
// wall-clock expiry that the store still holds, and a Set on it would be an
// update. Only the flight of key replaces key. ttl is what is left of the
// entry's TTL plus its longer stale window, so ristretto never drops an entry
// the policy would still serve; freshness itself is judged by Entry.state on
// the injected clock.
func (s *store) put(key string, e *Entry, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	cost := e.cost.Add(int64(cap(e.id)+cap(e.gz)+len(key)) + entryOverhead)
	if cost > s.max {
		s.rejected.Add(1)
		return
	}
	// Only an entry handed to the store has a home: what has none is
	// never charged, and gets no page files, which the store's OnExit
	// would never close.
	e.home, e.key, e.expires = s, key, time.Now().Add(ttl)
	mu := s.lock(key)
	mu.Lock()
	defer mu.Unlock()
	s.rc.Del(key)
	if !s.set(key, e, cost, ttl) {
		s.rejected.Add(1) // the set buffer was full: dropped
		return
	}
	s.settleLater(e)
}

// grow adds n bytes to the cost of e, in place, if the store still holds it
// (see "Growth").
func (s *store) grow(e *Entry, n int64) {
	mu := s.lock(e.key)
	mu.Lock()
	defer mu.Unlock()
	if s.unapplied(e.key) == e {
		// Its set may not be applied yet; another set now would be a
		// second insert of the key. Rare: a form made on a hit just after
		// the miss. Settling is asked before ristretto: asked after a Get
		// that missed, the settler could have applied the set and let the
		// entry go in between, and the growth would be lost.
		s.applied()
	}
	cur, ok := s.rc.Get(e.key)
	if !ok || cur != e {
		return
	}
	ttl := time.Until(e.expires)
	if ttl <= 0 {
		return
	}
	s.set(e.key, e, e.cost.Add(n), ttl)
}

// drop removes e if the store still holds it.
func (s *store) drop(e *Entry) {
	mu := s.lock(e.key)
	mu.Lock()
	defer mu.Unlock()
	// Settling first, for the reason grow gives.
	if s.unapplied(e.key) != e {
		if cur, ok := s.rc.Get(e.key); !ok || cur != e {
			return
		}
	}
	s.rc.Del(e.key) // queued after e's set, if that is not applied yet
	s.unsettle(e)
}

// bytes is ristretto's own ledger of the costs it holds.
func (s *store) bytes() int64 {
	return s.rc.MaxCost() - s.rc.RemainingCost()
}

// entries counts the entries held. O(entries): for a metrics scrape, not for
// a request. ristretto keeps no count without its Metrics option, which
// adds contended counters to every Get.
func (s *store) entries() uint64 {
	var n uint64
	s.rc.IterValues(func(*Entry) bool { n++; return false })
	return n
}

func (s *store) close() {
	s.closing.Store(true)
	close(s.settler.wake) // no put runs now (Cache.Close)
	<-s.settler.done
	s.rc.Close()
}
