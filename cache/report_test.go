package cache

import (
	"context"
	"errors"
	"testing"
	"time"
)

// What a Fetch reports goes back, as Get's result, to the caller that
// started its flight alone, whether the Fetch failed or not: a caller
// that joined the flight, or hit the page, is told nothing of a fetch it
// did not start.
func TestReportGoesToTheStarterAlone(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{})
	report := Report{Origin: "origin", Status: 200, Took: 5 * time.Millisecond}
	gate := make(chan struct{})
	fetch := func(context.Context, func() bool) ([]byte, Facts, error) {
		<-gate
		facts := liveFacts
		facts.Report = report
		return []byte(`{"data":1}`), facts, nil
	}
	starter := make(chan Result, 1)
	go func() {
		r, err := c.Get(context.Background(), "k", fetch)
		if err != nil {
			t.Errorf("starter: %v", err)
		}
		starter <- r
	}()
	<-waiting(1, c)
	joined := make(chan Result, 1)
	go func() {
		r, err := c.Get(context.Background(), "k", fetch)
		if err != nil {
			t.Errorf("joiner: %v", err)
		}
		joined <- r
	}()
	<-waiting(2, c)
	close(gate)
	if r := <-starter; r.Status != Miss || !r.Fetched || r.Report != report {
		t.Errorf("starter: %v fetched %v report %+v, want MISS and %+v", r.Status, r.Fetched, r.Report, report)
	}
	if r := <-joined; r.Status != Miss || r.Fetched || r.Report != (Report{}) {
		t.Errorf("joiner: %v fetched %v report %+v, want MISS and nothing", r.Status, r.Fetched, r.Report)
	}
	if r, err := c.Get(context.Background(), "k", fetch); err != nil || r.Status != Hit || r.Fetched {
		t.Errorf("hit: %v fetched %v (%v)", r.Status, r.Fetched, err)
	}

	failed := Report{Origin: "origin", Status: 502, Took: time.Millisecond}
	boom := errors.New("boom")
	r, err := c.Get(context.Background(), "failing", func(context.Context, func() bool) ([]byte, Facts, error) {
		return nil, Facts{Report: failed}, boom
	})
	if !errors.Is(err, boom) || !r.Fetched || r.Report != failed || r.Entry != nil {
		t.Errorf("failed fetch: %v, fetched %v report %+v entry %v", err, r.Fetched, r.Report, r.Entry)
	}
}
