package history

import (
	"sync"
	"time"
)

// Kind is a fault a run injects.
type Kind string

// The faults, and what each lets the edge answer besides a 200 or a 304
// (allowed, below).
const (
	LegacySlow   Kind = "legacy host slow"
	LegacyHang   Kind = "legacy host hanging"
	Legacy5xx    Kind = "legacy host 5xx"
	LegacyCut    Kind = "legacy host cuts bodies"
	RedisRestart Kind = "Redis restarted empty"
	RedisCut     Kind = "Redis cut off"
	ReplicaDown  Kind = "replica killed and restarted"
	Reload       Kind = "configuration reload"
	LimiterDeny  Kind = "limiter on_store_error: deny, Redis cut off"
)

// Fault is one fault in force from Start to End, on one replica or all.
type Fault struct {
	Kind       Kind
	Replica    int // -1: every replica
	Start, End time.Time
}

// Outcome is a failure the edge may answer: its status and variant A
// message (docs/CONTRACT.md#errors).
type Outcome struct {
	Status  int
	Message string
}

// rule is what a fault allows, and for how long after it ends.
type rule struct {
	outcomes []Outcome
	// noAnswer: a request may get no answer at all (connection refused or
	// reset): the replica is gone.
	noAnswer bool
	// staleIfError: a page may be served past stale-while-revalidate, up
	// to its stale-if-error bound (docs/CONTRACT.md#errors: "when the
	// legacy host fails ... that page is served"; a key's fetch that does
	// not answer within cache.stale_after counts, as does one waiting for
	// a lease of the shared tier that its holder will not release).
	staleIfError bool
	// tail is how long after the fault's end its effects may still be
	// seen (Tails).
	tail func(Tails) time.Duration
}

// Tails are how long after its end a fault's effects may still be seen,
// from the run's configuration.
type Tails struct {
	// Legacy: a circuit breaker stays open its open_timeout, and fetches
	// begun during the fault end within upstream.timeout per attempt.
	Legacy time.Duration
	// Redis: the shared Redis's breaker stays open a while, and the
	// limiter's and the cache's calls end within their timeouts.
	Redis time.Duration
}

func legacyTail(t Tails) time.Duration { return t.Legacy }
func redisTail(t Tails) time.Duration  { return t.Redis }
func second(Tails) time.Duration       { return time.Second }
func none(Tails) time.Duration         { return 0 }

var (
	busy        = Outcome{503, "Upstream busy"}
	unavailable = Outcome{503, "Upstream unavailable"}
	upstreamErr = Outcome{502, "Upstream error"}
	timeout     = Outcome{504, "Upstream timeout"}
)

var rules = map[Kind]rule{
	// Slow answers hold the shield's slots longer: a miss may find none;
	// calls past upstream.breaker.slow_call count against the breaker.
	LegacySlow: {outcomes: []Outcome{busy, unavailable}, staleIfError: true, tail: legacyTail},
	// Hanging calls end at upstream.timeout; the breaker opens on them.
	LegacyHang: {outcomes: []Outcome{timeout, unavailable, busy}, staleIfError: true, tail: legacyTail},
	Legacy5xx:  {outcomes: []Outcome{upstreamErr, unavailable, busy}, staleIfError: true, tail: legacyTail},
	// A body cut short is a broken answer (502), retried within budget.
	LegacyCut: {outcomes: []Outcome{upstreamErr, unavailable, busy}, staleIfError: true, tail: legacyTail},
	// Without Redis every replica works alone: nothing a client sees
	// changes but where pages come from, and flights waiting on the
	// shared tier's leases may outlast stale_after.
	RedisRestart: {staleIfError: true, tail: redisTail},
	RedisCut:     {staleIfError: true, tail: redisTail},
	// The replica's clients get no answer while it is down, or a 503 for
	// what it was answering when it stopped; the others may wait on the
	// leases it held.
	ReplicaDown: {outcomes: []Outcome{{503, "Server shutting down"}}, noAnswer: true, staleIfError: true, tail: second},
	Reload:      {tail: none},
	// With its store down, a replica told to deny answers 503 (README
	// "Errors"); restarting it into that mode is a ReplicaDown of its own.
	LimiterDeny: {outcomes: []Outcome{{503, "Rate limit unavailable"}}, staleIfError: true, tail: redisTail},
}

// Timeline records the faults of a run as they are injected. Safe for
// concurrent use.
type Timeline struct {
	mu     sync.Mutex
	faults []Fault
}

// Begin records that kind starts now on replica (-1: all), and returns
// the function that records its end.
func (t *Timeline) Begin(kind Kind, replica int) (end func()) {
	t.mu.Lock()
	i := len(t.faults)
	t.faults = append(t.faults, Fault{Kind: kind, Replica: replica, Start: time.Now()})
	t.mu.Unlock()
	return sync.OnceFunc(func() {
		t.mu.Lock()
		t.faults[i].End = time.Now()
		t.mu.Unlock()
	})
}

// Faults returns the faults recorded; one not ended yet ends now.
func (t *Timeline) Faults() []Fault {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]Fault(nil), t.faults...)
	for i := range out {
		if out[i].End.IsZero() {
			out[i].End = time.Now()
		}
	}
	return out
}

// active returns the faults whose effects may be seen on replica during
// [from, to].
func active(faults []Fault, tails Tails, replica int, from, to time.Time) []Fault {
	var out []Fault
	for _, f := range faults {
		if (f.Replica < 0 || f.Replica == replica) && !f.Start.After(to) && !f.End.Add(rules[f.Kind].tail(tails)).Before(from) {
			out = append(out, f)
		}
	}
	return out
}
