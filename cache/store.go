package cache

import (
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"
)

// The L1 store: ristretto, bounded in bytes (issue 3, item 1).
//
// Cost accounting. The cost of an entry is the bytes it really holds:
// cap(Body) + cap(Gzip) + len(key) + entryOverhead (the key is charged
// though ristretto keeps only its two hashes: a few bytes on the safe side).
// ristretto runs with IgnoreInternalCost, because entryOverhead already
// counts ristretto's own per-item record; adding its internal cost as well
// would charge it twice, and the policy's ledger (MaxCost - RemainingCost,
// our Stats().Bytes) would no longer be the sum of the costs we hand in.
//
// Admission and buffering. ristretto's Set is buffered and may be refused
// (TinyLFU admission, a full buffer, or a cost over MaxCost): nothing here
// depends on a Set landing. A flight hands its entry to all its waiters
// directly; the store only serves later calls. After a Set the flight calls
// Wait, so the entry is visible before the flight ends and a call that
// starts a new flight right after finds it (the check inside the flight).
// Wait costs the flight ristretto's admission work, which would otherwise
// run in its own goroutine: 1 to 4 us per miss, about 10 us when the Set
// evicts (BenchmarkGetMiss, fresh vs fresh-nowait), against an upstream
// round trip of milliseconds.
//
// Replacement. ristretto applies an update of an existing key in place and
// does not evict for the cost it adds ("evictions will be handled the next
// time a new item is added"), which would let a growing page push the store
// past MaxBytes. A replacement is therefore a Del then a Set, so the new
// entry goes through admission and eviction like any other.

// entryOverhead is the fixed per-entry charge beyond body, gzip copy and
// key, rounded up: the Entry struct (~150 B), its two ETag strings (~60 B),
// ristretto's storeItem (48 B) and its slots in three maps (store, policy
// costs, expiry buckets, ~150 B together). TestEntryOverhead checks it.
const entryOverhead = 512

// avgEntryBytes sizes ristretto's frequency counters: most pages are small
// (lookups ~1 KiB, 20-item pages ~8 KiB), so 2 KiB is a conservative mean.
// ristretto advises 10 counters per entry the cache can hold; each takes
// about 3 bytes, so the counters add ~1.5% to MaxBytes, outside the bound.
const avgEntryBytes = 2 << 10

type store struct {
	rc *ristretto.Cache[string, *Entry]
	// max is the bound; the check before Set saves ristretto the work of
	// refusing an entry that can never fit.
	max int64
	// skipWait is for the benchmark that measures what Wait costs.
	skipWait bool

	evictions, expired, rejected atomic.Uint64
	closing                      atomic.Bool
}

func newStore(maxBytes int64) (*store, error) {
	s := &store{max: maxBytes}
	rc, err := ristretto.NewCache(&ristretto.Config[string, *Entry]{
		NumCounters:        max(10*maxBytes/avgEntryBytes, 1024),
		MaxCost:            maxBytes,
		BufferItems:        64,
		IgnoreInternalCost: true,
		OnEvict:            s.onEvict,
		OnReject:           func(*ristretto.Item[*Entry]) { s.rejected.Add(1) },
	})
	if err != nil {
		return nil, err
	}
	s.rc = rc
	return s, nil
}

// onEvict runs in ristretto's single processing goroutine: it only counts
// (STYLE.md: callbacks stay cheap). The expiry cleanup reports through it
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

func (s *store) get(key string) *Entry {
	e, _ := s.rc.Get(key)
	return e
}

// put stores e under key, replacing whatever is held. The Del runs even when
// the flight saw no entry: ristretto's Get hides an entry past its wall-clock
// expiry that the store still holds, and a Set on it would be an update.
// Only the flight of key writes key, so nothing races the Del and the Set.
// The wall-clock TTL given to ristretto outlives every window of the entry
// (TTL plus the longer stale window), so ristretto never drops an entry the
// policy would still serve; freshness itself is judged by Entry.state on the
// injected clock.
func (s *store) put(key string, e *Entry) {
	e.cost = int64(cap(e.Body)+cap(e.Gzip)+len(key)) + entryOverhead
	if e.cost > s.max {
		s.rejected.Add(1)
		return
	}
	s.rc.Del(key)
	if !s.rc.SetWithTTL(key, e, e.cost, e.TTL+max(e.swr, e.sie)) {
		s.rejected.Add(1) // the set buffer was full: dropped
		return
	}
	if !s.skipWait {
		s.rc.Wait()
	}
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
	s.rc.Close()
}
