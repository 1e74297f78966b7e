package route

import (
	"hash/maphash"
	"sync/atomic"
)

// memo remembers requests that validated, by their target, so that the hot
// pages an edge serves over and over are neither matched nor validated
// again. It returns exactly what Match and Validate would: both are pure
// functions of the target (and of whether it came on the legacy path).
//
// Memory is bounded: a fixed number of slots, each holding at most one
// request, chosen by a hash of the target. A target replaces another in
// its slot only on its second miss there in a row, so that targets asked
// once each (misses, a scan) neither push the hot ones out nor allocate.
//
// Safe for concurrent use; a remembered Request is never written again
// and may be kept by anyone (a flight, a refresh).
type memo struct {
	seed  maphash.Seed
	slots []memoSlot
	mask  uint64
}

type memoSlot struct {
	entry atomic.Pointer[memoEntry]
	// missed is the hash of the last target that missed in this slot: the
	// doorkeeper of the slot.
	missed atomic.Uint64
}

type memoEntry struct {
	target string
	legacy bool
	req    Request
}

// memoSlots is the number of slots of the edge's memo, and memoMaxTarget
// the longest target it keeps: a client may pad a valid target with
// parameters the routes drop, up to the 8 KiB the edge accepts, and 4,096
// of those would hold 32 MiB. With the bound the memo holds 10 MiB at
// most; a longer target is validated every time.
const (
	memoSlots     = 4096
	memoMaxTarget = 512
)

// newMemo returns a memo of n slots (rounded up to a power of two).
func newMemo(n int) *memo {
	size := 1
	for size < n {
		size <<= 1
	}
	return &memo{seed: maphash.MakeSeed(), slots: make([]memoSlot, size), mask: uint64(size - 1)}
}

// Recall returns the request target validated to before (Match's route
// and Validate's request; ValidateLegacy's when legacy), or nil. The hash
// it computes is handed back for Remember, so that a miss hashes the
// target once.
func (t *Table) Recall(target string, legacy bool) (*Request, uint64) {
	return t.memo.get(target, legacy)
}

// Remember keeps req, validated from target, for Recall; h is what
// Recall returned. req is copied, its strings too (they may be views of
// a buffer its owner reuses): the caller keeps its own.
func (t *Table) Remember(h uint64, target string, legacy bool, req *Request) {
	t.memo.put(h, target, legacy, req)
}

func (m *memo) get(target string, legacy bool) (*Request, uint64) {
	if len(target) > memoMaxTarget {
		return nil, 0
	}
	h := maphash.String(m.seed, target)
	if legacy {
		h = ^h
	}
	e := m.slots[h&m.mask].entry.Load()
	if e != nil && e.legacy == legacy && e.target == target {
		return &e.req, h
	}
	return nil, h
}

func (m *memo) put(h uint64, target string, legacy bool, req *Request) {
	if len(target) > memoMaxTarget {
		return
	}
	s := &m.slots[h&m.mask]
	if s.entry.Load() != nil && s.missed.Swap(h) != h {
		return // the slot's request stays until this target misses again
	}
	s.entry.Store(newMemoEntry(target, legacy, req))
}

// newMemoEntry copies target and req into one block of memory of their
// own (ownCopy): a remembered request is owned, and Own hands it on as is.
func newMemoEntry(target string, legacy bool, req *Request) *memoEntry {
	e := &memoEntry{legacy: legacy}
	e.target = ownCopy(&e.req, req, target)
	return e
}
