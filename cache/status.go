package cache

import "strconv"

// Status is how Get answered, and which tier answered. Its String is the
// X-Cache header value and the cache label of the edge's metrics: one name
// per result whichever tier gave it. L2 tells the shared tier's answers
// apart, for a Cache-Status header (RFC 9211).
type Status uint8

const (
	// Hit: a fresh entry from memory, or one stored by a flight that ended
	// just before this call's own flight began.
	Hit Status = iota + 1
	// Miss: the page was fetched for this call, or for a concurrent identical
	// call whose fetch this one shared.
	Miss
	// Stale: an entry past its TTL, inside stale_while_revalidate (a refresh
	// runs) or stale_if_error (the fetch failed).
	Stale
	// Bypass: fetched and not stored, because the policy gives ttl <= 0.
	Bypass
	// HitL2: not in memory; a fresh page from the shared tier (l2.go),
	// fetched earlier by this replica or another.
	HitL2
	// StaleL2: as Stale, with the page from the shared tier: inside
	// stale_while_revalidate (one refresh runs across the fleet), or inside
	// stale_if_error after a failed fetch here or on the replica this call
	// waited for.
	StaleL2
	// MissL2: as Miss, with the fetch made by another replica, for a
	// concurrent identical call there: this call waited for it and read the
	// page from the shared tier (RFC 9211 "collapsed").
	MissL2
)

// statusNames are the names of the results, by Kind.
var statusNames = [...]string{Hit: "HIT", Miss: "MISS", Stale: "STALE", Bypass: "BYPASS"}

// kinds are the results whichever tier gave them, by Status.
var kinds = [...]Status{
	Hit: Hit, Miss: Miss, Stale: Stale, Bypass: Bypass,
	HitL2: Hit, StaleL2: Stale, MissL2: Miss,
}

// L2 reports whether the shared tier answered.
func (s Status) L2() bool { return s >= HitL2 && s <= MissL2 }

// Kind is the result whichever tier gave it: Hit, Miss, Stale or Bypass,
// the four that String names; 0 for a value that is not a Status.
func (s Status) Kind() Status {
	if int(s) < len(kinds) {
		return kinds[s]
	}
	return 0
}

// String is the result's name: HIT, MISS, STALE or BYPASS.
func (s Status) String() string {
	if k := s.Kind(); k != 0 {
		return statusNames[k]
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}
