package limits

import (
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"tradergate/internal/testkit"
)

func TestSetHeaders(t *testing.T) {
	now := time.Unix(1_800_000_018, 0)
	reset := now.Add(42 * time.Second)
	storeErr := fmt.Errorf("%w: boom", errStoreUnavailable)
	tests := []struct {
		name string
		d    Decision
		now  time.Time
		want map[string]string // "" = absent
	}{
		{
			name: "allowed",
			d:    Decision{Policy: "free", Limit: 60, Remaining: 59, Reset: reset, Window: time.Minute, Allowed: true},
			now:  now,
			want: map[string]string{
				"X-RateLimit-Limit":     "60",
				"X-RateLimit-Remaining": "59",
				"X-RateLimit-Reset":     "1800000060",
				"RateLimit-Policy":      `"free";q=60;w=60`,
				"RateLimit":             `"free";r=59;t=42`,
				"Retry-After":           "",
			},
		},
		{
			name: "refused",
			d:    Decision{Policy: "free", Limit: 60, Remaining: 0, Reset: reset, Window: time.Minute},
			now:  now.Add(500 * time.Millisecond), // 41.5s to go: rounded up
			want: map[string]string{
				"X-RateLimit-Limit":     "60",
				"X-RateLimit-Remaining": "0",
				"X-RateLimit-Reset":     "1800000060",
				"RateLimit-Policy":      `"free";q=60;w=60`,
				"RateLimit":             `"free";r=0;t=42`,
				"Retry-After":           "42",
			},
		},
		{
			name: "refused at the last instant: Retry-After at least 1",
			d:    Decision{Policy: "pro", Limit: 1200, Remaining: 0, Reset: reset, Window: time.Minute},
			now:  reset,
			want: map[string]string{
				"RateLimit":   `"pro";r=0;t=0`,
				"Retry-After": "1",
			},
		},
		{
			name: "store failed, allow: nothing invented",
			d:    Decision{Policy: "free", Limit: 60, Remaining: -1, Reset: reset, Window: time.Minute, Allowed: true, StoreErr: storeErr},
			now:  now,
			want: map[string]string{
				"X-RateLimit-Limit":     "60",
				"X-RateLimit-Remaining": "",
				"X-RateLimit-Reset":     "1800000060",
				"RateLimit-Policy":      `"free";q=60;w=60`,
				"RateLimit":             "",
				"Retry-After":           "",
			},
		},
		{
			name: "store failed, deny",
			d:    Decision{Policy: "free", Limit: 60, Remaining: -1, Reset: reset, Window: time.Minute, StoreErr: storeErr},
			now:  now,
			want: map[string]string{
				"X-RateLimit-Remaining": "",
				"RateLimit":             "",
				"Retry-After":           "1",
			},
		},
		{
			name: "policy name escaped as a Structured Field String",
			d:    Decision{Policy: `a"b\c` + "\x01é", Limit: 1, Remaining: 1, Reset: reset, Window: time.Second, Allowed: true},
			now:  now,
			want: map[string]string{
				"RateLimit-Policy": `"a\"b\\c___";q=1;w=1`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			setHeaders(tt.d, h, tt.now)
			for k, want := range tt.want {
				if got := h.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

func TestSetHeadersReplacesStaleValues(t *testing.T) {
	// A response that already carries rate limit fields (a reused header
	// map) gets this decision's, and none of a store failure's guesses:
	// the fields it cannot fill are handed over as "", for the front to
	// clear.
	now := time.Unix(1_800_000_000, 0)
	d := Decision{Policy: "free", Limit: 60, Remaining: -1, Reset: now.Add(time.Minute), Window: time.Minute, Allowed: true, StoreErr: errStoreUnavailable}
	got := map[string]string{}
	var buf []byte
	d.AppendHeaders(&buf, now, func(name, value string) { got[name] = value })
	for _, name := range []string{"X-RateLimit-Remaining", "RateLimit"} {
		if v, ok := got[name]; !ok || v != "" {
			t.Fatalf("%s handed over as %q (present %v), want \"\" so that a stale value is cleared", name, v, ok)
		}
	}
	h := http.Header{}
	setHeaders(Decision{Policy: "free", Limit: 60, Remaining: 10, Reset: now.Add(time.Minute), Window: time.Minute, Allowed: true}, h, now)
	setHeaders(d, h, now)
	if h.Get("X-RateLimit-Remaining") != "" || h.Get("RateLimit") != "" {
		t.Fatalf("stale remaining kept: %v", h)
	}
}

// A kept bucket's window formats its fixed fields once a second and keeps
// them: every answer must still read as if formatted afresh, across
// seconds, a plan whose allowance changes on reload, a refusal and another
// policy name.
func TestKeptWindowFieldsFollowClockAndPlan(t *testing.T) {
	clk := testkit.NewClock(t0.Add(250 * time.Millisecond))
	l := newLimiter(t, Config{}, Options{Now: clk.Now})
	b := NewBucket("key:fields")
	fields := func(d Decision, now time.Time) map[string]string {
		got := map[string]string{}
		buf := make([]byte, 0, 8) // grows while values point into it
		d.AppendHeaders(&buf, now, func(name, value string) { got[name] = value })
		return got
	}
	steps := []struct {
		plan   Plan
		policy string
		after  time.Duration
	}{
		{Plan{Requests: 3, Window: time.Minute}, "free", 0},
		{Plan{Requests: 3, Window: time.Minute}, "free", 300 * time.Millisecond}, // same second
		{Plan{Requests: 3, Window: time.Minute}, "free", time.Second},
		{Plan{Requests: 5, Window: time.Minute}, "free", 0}, // reloaded allowance
		{Plan{Requests: 5, Window: time.Minute}, "pro", 0},  // another name
		{Plan{Requests: 5, Window: time.Minute}, "pro", 2 * time.Second},
		{Plan{Requests: 5, Window: time.Minute}, "pro", 0}, // refused from here
		{Plan{Requests: 5, Window: time.Minute}, "pro", 3 * time.Second},
	}
	for i, st := range steps {
		clk.Advance(st.after)
		now := clk.Now()
		d := l.TakeAt(bg, now, b, st.plan, st.policy)
		fresh := d
		fresh.window = nil // formatted from nothing
		got, want := fields(d, now), fields(fresh, now)
		if !maps.Equal(got, want) {
			t.Fatalf("step %d: kept window's fields\n%v\nwant\n%v", i, got, want)
		}
		toReset := strconv.FormatInt(CeilSeconds(d.Reset.Sub(now)), 10)
		if got["X-RateLimit-Limit"] != strconv.FormatInt(st.plan.Requests, 10) ||
			!strings.HasPrefix(got["RateLimit"], `"`+st.policy+`";r=`) ||
			!strings.HasSuffix(got["RateLimit"], ";t="+toReset) ||
			(!d.Allowed && got["Retry-After"] != toReset) {
			t.Fatalf("step %d: %v (allowed %v, %s s to reset)", i, got, d.Allowed, toReset)
		}
	}
}
