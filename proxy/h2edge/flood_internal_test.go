package h2edge

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// The thresholds of the defenses, as docs/CONFIGURATION.md ("Limits
// against abuse") states them: changing one is changing what the page
// promises, and the tests below hold what each does.
func TestDefenseThresholdsAsDocumented(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want int64
	}{
		{"floodLimit", floodLimit, 200},
		{"floodCredit", floodCredit, 500},
		{"floodRefill", int64(floodRefill), int64(time.Second)},
		{"closedWindowMin", closedWindowMin, 1 << 10},
		{"maxEmptyContinuations", maxEmptyContinuations, 200},
		{"maxSettings", maxSettings, 100},
		{"defaultMaxStreams", defaultMaxStreams, 250},
		{"logEvery", int64(logEvery), int64(time.Second)},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, docs/CONFIGURATION.md says %d", tc.name, tc.got, tc.want)
		}
	}
}

// The flood score: floodLimit useless frames are let through and the
// next one cuts; answers earn a credit of at most floodCredit; each
// floodRefill that passes takes one off a positive score, and gives no
// credit.
func TestFloodScore(t *testing.T) {
	cutAfter := func(c *conn) int {
		for i := 1; i <= 10_000; i++ {
			if err := c.uselessLocked(1, ReasonFlood); err != nil {
				var calm calmError
				if !errors.As(err, &calm) || calm.reason != ReasonFlood {
					t.Fatalf("error %v", err)
				}
				return i
			}
		}
		return -1
	}
	if n := cutAfter(&conn{}); n != floodLimit+1 {
		t.Errorf("a fresh connection cut at useless frame %d, want %d", n, floodLimit+1)
	}
	c := &conn{}
	for range 2 * floodCredit {
		c.usefulLocked()
	}
	if c.flood != -floodCredit {
		t.Errorf("after %d answers the score is %d, want %d", 2*floodCredit, c.flood, -floodCredit)
	}
	if n := cutAfter(c); n != floodLimit+floodCredit+1 {
		t.Errorf("a connection with its whole credit cut at useless frame %d, want %d", n, floodLimit+floodCredit+1)
	}

	c = &conn{flood: 50, floodAt: time.Now().Add(-3*floodRefill - floodRefill/2)}
	if err := c.uselessLocked(0, ReasonFlood); err != nil || c.flood != 47 {
		t.Errorf("3.5 refills later a score of 50 is %d (%v), want 47", c.flood, err)
	}
	c = &conn{flood: 2, floodAt: time.Now().Add(-10 * floodRefill)}
	_ = c.uselessLocked(0, ReasonFlood)
	if c.flood != 0 {
		t.Errorf("refills took a score of 2 to %d, want 0: time earns no credit", c.flood)
	}
}

// A cut names what spent most of the score since it was last at or
// below zero, not the frame that came last: a client that sends
// requests past the header budget with a PING now and then is cut for
// header_budget even when a PING is the last straw, and PINGs that an
// answer or time already paid for do not count against a later reset
// flood.
func TestFloodCutNamesWhatSpentTheBudget(t *testing.T) {
	cut := func(c *conn, n int, reason string) string {
		t.Helper()
		err := c.uselessLocked(n, reason)
		if err == nil {
			return ""
		}
		var calm calmError
		if !errors.As(err, &calm) {
			t.Fatalf("error %v", err)
		}
		return calm.reason
	}
	c := &conn{}
	for range floodLimit/2 - 1 { // 198 by requests past the budget
		if r := cut(c, 2, ReasonHeaderBudget); r != "" {
			t.Fatalf("cut early, for %s", r)
		}
	}
	for _, want := range []string{"", "", ReasonHeaderBudget} { // 199, 200, 201 by PINGs
		if r := cut(c, 1, ReasonFlood); r != want {
			t.Fatalf("at score %d cut for %q, want %q", c.flood, r, want)
		}
	}

	c = &conn{}
	for range floodLimit {
		cut(c, 1, ReasonFlood)
	}
	for range floodLimit + 1 { // an answer each: the PINGs are paid for
		c.usefulLocked()
	}
	r := ""
	for i := 0; r == "" && i < 10*floodLimit; i++ {
		r = cut(c, 1, ReasonRapidReset)
	}
	if r != ReasonRapidReset {
		t.Errorf("resets after paid-for PINGs cut for %q, want %s", r, ReasonRapidReset)
	}
}

// A WINDOW_UPDATE for a closed stream is free while it gives back no
// more than what is left to give back, each counted as at least
// closedWindowMin; past that each adds to the flood score.
// TestWindowUpdatesAfterLargeAnswers holds how much that is.
func TestClosedStreamWindowUpdates(t *testing.T) {
	const left = 64 << 10
	c := &conn{streams: map[uint32]*Stream{}, maxID: 1, closedWindow: left}
	f := &http2.WindowUpdateFrame{FrameHeader: http2.FrameHeader{Type: http2.FrameWindowUpdate, StreamID: 1}, Increment: 1}
	free := 0
	for range 2 * left / closedWindowMin {
		if err := c.processWindowUpdate(f); err != nil {
			t.Fatal(err)
		}
		if c.flood > 0 {
			break
		}
		free++
	}
	if want := left / closedWindowMin; free != want || c.flood != 1 {
		t.Errorf("%d free updates of 1 byte then a score of %d; want %d then 1", free, c.flood, want)
	}
}
