package route

import (
	"hash/maphash"
	"sync/atomic"
	"unsafe"
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
// own.
func newMemoEntry(target string, legacy bool, req *Request) *memoEntry {
	n := len(target) + len(req.PathParam) + len(req.Key)
	for _, v := range req.query.vals {
		n += len(v)
	}
	buf := make([]byte, 0, n)
	// own appends s to buf and returns the copy. buf never grows past
	// its capacity, so the bytes under every copy stay where they are.
	own := func(s string) string {
		if s == "" {
			return ""
		}
		start := len(buf)
		buf = append(buf, s...)
		return unsafe.String(&buf[start], len(s))
	}
	e := &memoEntry{target: own(target), legacy: legacy}
	e.req = *req
	e.req.PathParam = own(req.PathParam)
	for i, v := range req.query.vals {
		e.req.query.vals[i] = own(v)
	}
	e.req.Key = own(req.Key)
	e.req.RawQuery = e.req.Key[len(e.req.Key)-len(req.RawQuery):]
	return e
}
