package cache

import "sync/atomic"

// Stats are the cache's counters, for the proxy's metrics. All but Entries,
// Bytes and Waiting only grow.
type Stats struct {
	// Calls of Get by answer (X-Cache), whichever tier gave it. Misses
	// include calls that got an error or whose ctx ended while waiting.
	Hits, Misses, Stale, Bypass uint64
	// Coalesced counts calls answered by a flight another call started:
	// upstream calls saved.
	Coalesced uint64
	// Fetches counts calls of Fetch (upstream calls); Refreshes the
	// background refreshes started.
	Fetches, Refreshes uint64
	// Evictions counts entries removed to make room, Expired those dropped
	// by the store after TTL plus the longer stale window, Rejected the
	// entries the store refused (admission, a full set buffer, too large).
	Evictions, Expired, Rejected uint64
	// Entries and Bytes are held now; Bytes is the store's own ledger. It
	// exceeds max_bytes at most by the forms made on hits since the last
	// insert, which evicts for them (store.go, "Growth").
	Entries, Bytes uint64
	// Waiting is the number of calls waiting on a flight now.
	Waiting uint64
	// Runners are the goroutines kept to run flights (runners.go), busy
	// or waiting at most runnerIdle for the next one.
	Runners uint64
	// Files and FileBytes are the page files open now (files.go) and the
	// bytes they hold, a part of Bytes.
	Files, FileBytes uint64

	// The shared tier (l2.go), one lookup per flight that asks it: a fresh
	// value (L2Hits), a stale one served or held for stale-if-error
	// (L2Stale), none (L2Misses), a failed Redis call (L2Errors: the flight
	// then works alone), a value that does not decode (L2Corrupt: a miss).
	L2Hits, L2Misses, L2Stale, L2Errors, L2Corrupt uint64
	// L2Stores counts values written to the shared tier.
	L2Stores uint64
	// L2LockWaits counts flights that waited for another replica's fetch;
	// L2LockWaitTimeouts those that stopped waiting and fetched themselves.
	L2LockWaits, L2LockWaitTimeouts uint64
}

type counters struct {
	hits atomic.Uint64
	// Every hit adds to hits; keep the other counters off its cache line.
	_                                         [56]byte
	misses, stale, bypass, coalesced, fetches atomic.Uint64
	refreshes                                 atomic.Uint64
	waiting, runners                          atomic.Int64
	files, fileBytes                          atomic.Int64

	l2Hits, l2Misses, l2Stale, l2Errors, l2Corrupt atomic.Uint64
	l2Stores, l2LockWaits, l2LockWaitTimeouts      atomic.Uint64
}

func (k *counters) count(s Status) {
	switch s {
	case Hit, HitL2:
		k.hits.Add(1)
	case Miss, MissL2:
		k.misses.Add(1)
	case Stale, StaleL2:
		k.stale.Add(1)
	case Bypass:
		k.bypass.Add(1)
	}
}

// Stats returns the counters. It walks the store to count entries: call it
// from a metrics scrape, not per request.
func (c *Cache) Stats() Stats {
	k := &c.stats
	// ristretto's ledger and its callbacks' counts, with every store so
	// far (store.go, "Settling").
	c.store.applied()
	return Stats{
		Hits:      k.hits.Load(),
		Misses:    k.misses.Load(),
		Stale:     k.stale.Load(),
		Bypass:    k.bypass.Load(),
		Coalesced: k.coalesced.Load(),
		Fetches:   k.fetches.Load(),
		Refreshes: k.refreshes.Load(),
		Evictions: c.store.evictions.Load(),
		Expired:   c.store.expired.Load(),
		Rejected:  c.store.rejected.Load(),
		Entries:   c.store.entries(),
		Bytes:     uint64(max(c.store.bytes(), 0)),
		Waiting:   uint64(max(k.waiting.Load(), 0)),
		Runners:   uint64(max(k.runners.Load(), 0)),
		Files:     uint64(max(k.files.Load(), 0)),
		FileBytes: uint64(max(k.fileBytes.Load(), 0)),

		L2Hits:             k.l2Hits.Load(),
		L2Misses:           k.l2Misses.Load(),
		L2Stale:            k.l2Stale.Load(),
		L2Errors:           k.l2Errors.Load(),
		L2Corrupt:          k.l2Corrupt.Load(),
		L2Stores:           k.l2Stores.Load(),
		L2LockWaits:        k.l2LockWaits.Load(),
		L2LockWaitTimeouts: k.l2LockWaitTimeouts.Load(),
	}
}
