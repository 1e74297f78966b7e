package cache

import "sync/atomic"

// Stats are the cache's counters, for the metrics issue to export (issue 3,
// item 8). All but Entries, Bytes and Waiting only grow.
type Stats struct {
	// Calls of Get by answer. Misses include calls that got an error or
	// whose ctx ended while waiting.
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
	// Entries and Bytes are held now; Bytes is the store's own ledger and
	// never exceeds max_bytes.
	Entries, Bytes uint64
	// Waiting is the number of calls waiting on a flight now.
	Waiting uint64
}

type counters struct {
	hits atomic.Uint64
	// Every hit adds to hits; keep the other counters off its cache line.
	_                                         [56]byte
	misses, stale, bypass, coalesced, fetches atomic.Uint64
	refreshes                                 atomic.Uint64
	waiting                                   atomic.Int64
}

func (k *counters) count(s Status) {
	switch s {
	case Hit:
		k.hits.Add(1)
	case Miss:
		k.misses.Add(1)
	case Stale:
		k.stale.Add(1)
	case Bypass:
		k.bypass.Add(1)
	}
}

// Stats returns the counters. It walks the store to count entries: call it
// from a metrics scrape, not per request.
func (c *Cache) Stats() Stats {
	k := &c.stats
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
	}
}
