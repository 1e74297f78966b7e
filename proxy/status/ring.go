package status

import (
	"strings"
	"sync"
	"sync/atomic"
)

// ringSlots is how many seconds a ring remembers: the minute the page shows
// (the 60 full seconds before the current one) plus the second being
// counted, rounded up to a power of two.
const ringSlots = 64

// windowSeconds is the span of every "last minute" figure.
const windowSeconds = 60

// ring counts events per second. Each slot packs the Unix second it counts
// (high 32 bits) and its count (low 32 bits) into one word, so moving a slot
// to a new second and counting in it is one compare-and-swap: no lock, no
// reset pass, and no count of an old second leaks into a new one. A count
// reaches 2³² only at four billion events in one second on one counter.
type ring [ringSlots]atomic.Uint64

func (r *ring) add(sec uint32) {
	s := &r[sec%ringSlots]
	for {
		old := s.Load()
		next := uint64(sec)<<32 | 1
		if uint32(old>>32) == sec {
			next = old + 1
		}
		if s.CompareAndSwap(old, next) {
			return
		}
	}
}

// sum counts the events of the seconds from first to last, inclusive.
func (r *ring) sum(first, last uint32) uint64 {
	var n uint64
	for i := range r {
		v := r[i].Load()
		if sec := uint32(v >> 32); sec >= first && sec <= last {
			n += v & 0xffffffff
		}
	}
	return n
}

// series is one name's counts: per second for the last minute, and since
// start.
type series struct {
	ring  ring
	total atomic.Int64
}

func (s *series) add(sec uint32) {
	s.ring.add(sec)
	s.total.Add(1)
}

// named is a set of series by name (plans, key ids). Names come from the
// configuration, so there are few; max guards the memory anyway: once it
// holds max names, new names are not counted.
//
// Lookups read an immutable map through an atomic pointer, so the hot path
// takes no lock and does not allocate; adding a name copies the map under
// mu, which happens once per name.
type named struct {
	max int
	mu  sync.Mutex // serialises adding names
	m   atomic.Pointer[map[string]*series]
}

func newNamed(max int) *named {
	n := &named{max: max}
	m := map[string]*series{}
	n.m.Store(&m)
	return n
}

// get returns name's series, adding it if there is room; nil otherwise.
func (n *named) get(name string) *series {
	if s, ok := (*n.m.Load())[name]; ok {
		return s
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	old := *n.m.Load()
	if s, ok := old[name]; ok {
		return s
	}
	if len(old) >= n.max {
		return nil
	}
	m := make(map[string]*series, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	s := &series{}
	// The caller's string may live in a buffer it reuses (fasthttp's);
	// the map keeps its own.
	m[strings.Clone(name)] = s
	n.m.Store(&m)
	return s
}

func (n *named) each(f func(name string, s *series)) {
	for k, v := range *n.m.Load() {
		f(k, v)
	}
}
