package legacysim

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Faults are switches for the fault suites, all off in the zero value.
// They apply in this order: Latency, Hang, FailStatus (which answer before
// routing, auth and validation, like a failing host), then Malformed,
// Truncate and PadBytes, which change a 200 answer only.
type Faults struct {
	Route      string        // apply only to this route name; "" = all routes, unknown paths included
	Latency    time.Duration // delay before answering; stops waiting when the client goes
	Hang       bool          // never answer; return when the request context ends
	FailStatus int           // answer this HTTP status (100 to 999; SetFaults panics on others) with a variant B failure body...
	FailRate   float64       // ...for this fraction of requests (0 with FailStatus set means 1). Request n fails when floor(n*rate) > floor((n-1)*rate)
	RetryAfter int           // seconds; sent as Retry-After on FailStatus answers when > 0
	Malformed  bool          // 200 with a body that is not JSON
	Truncate   bool          // 200, Content-Length of the full body, half of it written, then the connection is aborted
	PadBytes   int           // pad the success body with this many bytes of JSON whitespace; zero or negative: none
}

// faultState is one SetFaults generation: the switches and the count of
// requests in scope that reached the FailRate draw, which starts again at
// every SetFaults so a suite's spread does not depend on earlier traffic.
type faultState struct {
	f    Faults
	rate float64
	n    atomic.Int64
}

// SetFaults replaces the fault switches; safe while serving. Requests
// already past a switch keep the state they saw. A FailStatus that is no
// HTTP status is a mistake of the caller, reported here: net/http would
// panic on it in every faulted handler, which a client sees as a dropped
// connection, not as the failure it asked for.
func (s *Sim) SetFaults(f Faults) {
	if f.FailStatus != 0 && (f.FailStatus < 100 || f.FailStatus > 999) {
		panic(fmt.Sprintf("legacysim: Faults.FailStatus %d is not an HTTP status", f.FailStatus))
	}
	st := &faultState{f: f, rate: min(1, max(0, f.FailRate))}
	if st.rate == 0 {
		st.rate = 1
	}
	s.faults.Store(st)
}

func (st *faultState) applies(rt route) bool {
	return st.f.Route == "" || st.f.Route == rt.String()
}

// wait sleeps for the latency or until ctx ends; false means the client
// went and nothing should be written.
func (st *faultState) wait(ctx context.Context) bool {
	if st.f.Latency <= 0 {
		return true
	}
	t := time.NewTimer(st.f.Latency)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// fails draws a deterministic spread, so that tests can count on it: with
// rate 0.25 the 4th, 8th, 12th... request in scope fails.
func (st *faultState) fails() bool {
	if st.f.FailStatus == 0 {
		return false
	}
	n := float64(st.n.Add(1))
	return math.Floor(n*st.rate) > math.Floor((n-1)*st.rate)
}

// malformedBody is what a broken host or an HTML error page in front of it
// might send with status 200.
const malformedBody = `<html><body>upstream error</body></html>` + "\n" + `{"success":true,"code":"0","data":`
