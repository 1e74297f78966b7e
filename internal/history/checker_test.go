package history

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"tradergate/proxy/route"
)

// The checker can fail: a short calm history that passes, with answers
// that break the promise put into it one at a time, each caught by the
// rule it breaks.
func TestCheckerCatches(t *testing.T) {
	f := newFleet(t)
	calm := func(d time.Duration) { time.Sleep(d) }
	d := 4 * time.Second
	if raceEnabled {
		d = 12 * time.Second
	}
	res := f.run([]phase{{"calm", calm}}, d, 0)
	for _, v := range res.Violations {
		t.Fatalf("the calm history breaks the promise:\n%s", v.String())
	}
	exs := f.rec.Exchanges()

	// pick returns the index of an exchange that ok accepts.
	pick := func(what string, ok func(e *Exchange) bool) int {
		t.Helper()
		for i := range exs {
			if ok(&exs[i]) {
				return i
			}
		}
		t.Fatalf("no exchange in the history is %s", what)
		return -1
	}
	changing := func(e *Exchange) bool {
		return e.Status == 200 && e.Method == "GET" && e.ContentEncoding == "" && !strings.Contains(e.CacheControl, "immutable") &&
			strings.Contains(e.Target, "/activity") && !strings.Contains(e.Target, "cursor=") && e.Received.Sub(exs[0].Sent) > 3*time.Second
	}
	withBody := func(e *Exchange, body string) {
		e.Body = body
		e.ETag = etagOf(xxhash.Sum64String(body), false)
	}

	for _, tc := range []struct {
		name string
		rule string
		edit func(exs []Exchange, c *Checker)
	}{
		{"stale beyond its bound: a page 30s old, outside any fault", "stale beyond its bound", func(exs []Exchange, c *Checker) {
			c.SlowFetches = false // the bound of a run on a machine fast enough to tell
			e := &exs[pick("a page that changes", changing)]
			e.Age, e.XCache = "30", "STALE"
		}},
		{"stale beyond its bound: a page past stale_if_error", "stale beyond its bound", func(exs []Exchange, c *Checker) {
			e := &exs[pick("a page that changes", changing)]
			e.Age, e.XCache = "400", "STALE"
		}},
		{"stale beyond its bound: a MISS 30s old, past TTL and the longest fetch", "stale beyond its bound", func(exs []Exchange, c *Checker) {
			e := &exs[pick("a page that changes", changing)]
			e.Age, e.XCache = "30", "MISS"
		}},
		{"stale beyond its bound: an old version served as new", "older than its Age", func(exs []Exchange, c *Checker) {
			// A version of the page the legacy host last gave well
			// before the answer, served with Age 0.
			var old string
			i := pick("a page that changed since an earlier version", func(e *Exchange) bool {
				if !changing(e) {
					return false
				}
				last := map[uint64]Version{}
				for _, v := range c.Truth.Versions(f.upstreamOf(e.Target)) {
					last[v.Hash] = v
				}
				for h, v := range last {
					if h != xxhash.Sum64String(e.Body) && v.At.Before(e.Sent.Add(-2500*time.Millisecond)) {
						old = v.Body
						return true
					}
				}
				return false
			})
			withBody(&exs[i], old)
			exs[i].Age = "0"
		}},
		{"swapped body: another request's page", "not an answer of the legacy host", func(exs []Exchange, c *Checker) {
			i := pick("a page", changing)
			j := pick("a page of another request", func(e *Exchange) bool {
				return e.Status == 200 && e.Method == "GET" && e.Target != exs[i].Target && strings.Contains(e.Target, "/deposits-withdrawals")
			})
			withBody(&exs[i], exs[j].Body)
		}},
		{"truncated body, its ETag made over what is left", "not an answer of the legacy host", func(exs []Exchange, c *Checker) {
			e := &exs[pick("a page", changing)]
			withBody(e, e.Body[:len(e.Body)/2])
		}},
		{"truncated body, its ETag the whole page's", "ETag does not name the body", func(exs []Exchange, c *Checker) {
			e := &exs[pick("a page", changing)]
			e.Body = e.Body[:len(e.Body)/2]
		}},
		{"a 503 no fault explains", "failure no fault allows", func(exs []Exchange, c *Checker) {
			e := &exs[pick("a page", changing)]
			e.Status, e.Body, e.CacheControl = 503, `{"message":"Upstream busy","status_code":"0","data":null}`, "no-store"
		}},
		{"a failure outside the envelope", "failure outside the envelope", func(exs []Exchange, c *Checker) {
			e := &exs[pick("a page", changing)]
			e.Status, e.Body, e.CacheControl = 502, `{"error":"bad gateway"}`, "no-store"
		}},
		{"a 304 for an ETag that no longer names the page", "304 without a matching If-None-Match", func(exs []Exchange, c *Checker) {
			e := &exs[pick("a page", changing)]
			e.Status, e.Body, e.IfNoneMatch = 304, "", `"0123456789abcdef"`
		}},
		{"an immutable page that changed", "immutable page changed", func(exs []Exchange, c *Checker) {
			i := pick("an immutable page", func(e *Exchange) bool {
				return e.Status == 200 && e.Method == "GET" && e.ContentEncoding == "" && strings.Contains(e.CacheControl, "immutable") &&
					strings.Contains(e.Target, "toTimestamp=")
			})
			// The legacy host said something else for it once (as a page
			// it should never have been called settled would), and the
			// edge served that too.
			up := f.upstreamOf(exs[i].Target)
			other := strings.Replace(exs[i].Body, `"items":[`, `"items":[ `, 1)
			c.Truth.versions[up] = append(c.Truth.versions[up], Version{At: exs[i].Sent.Add(-time.Second), Hash: xxhash.Sum64String(other), Body: other})
			withBody(&exs[i], other)
		}},
		{"no answer, with every replica up", "no whole answer", func(exs []Exchange, c *Checker) {
			e := &exs[pick("a page", changing)]
			e.Status, e.Err = 0, "connection refused"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := append([]Exchange(nil), exs...)
			c := f.checker([]string{"calm"})
			tc.edit(bad, c)
			res := c.Check(bad)
			if len(res.Violations) == 0 {
				t.Fatal("not caught")
			}
			found := false
			for _, v := range res.Violations {
				found = found || v.Rule == tc.rule
			}
			if !found {
				t.Errorf("caught as %q, want %q", res.Violations[0].Rule, tc.rule)
			}
			t.Logf("caught:\n%s", res.Violations[0].String())
		})
	}

	// The streams of the same history, broken one way at a time: each
	// subscription's events are its whole stream once, in order, each
	// the legacy host's item.
	if len(f.subs) == 0 {
		t.Fatal("the history holds no stream")
	}
	busiest := 0
	for i := range f.subs {
		if len(f.subs[i].Events) > len(f.subs[busiest].Events) {
			busiest = i
		}
	}
	if n := len(f.subs[busiest].Events); n < 4 {
		t.Fatalf("the busiest subscriber got %d events, the cases want 4", n)
	}
	for _, tc := range []struct {
		name string
		rule string
		edit func(evs []StreamEvent) []StreamEvent
		// stay is how much longer than it did the subscriber stays.
		stay time.Duration
	}{
		{"an event lost between two others", "stream event lost", func(evs []StreamEvent) []StreamEvent {
			k := len(evs) / 2
			return append(evs[:k:k], evs[k+1:]...)
		}, 0},
		{"an event delivered twice", "stream event twice", func(evs []StreamEvent) []StreamEvent {
			k := len(evs) / 2
			return slices.Insert(evs, k+2, evs[k])
		}, 0},
		{"two events swapped", "stream event out of order", func(evs []StreamEvent) []StreamEvent {
			k := len(evs) / 2
			evs[k], evs[k+1] = evs[k+1], evs[k]
			return evs
		}, 0},
		{"an event's data not the item's", "stream event differs", func(evs []StreamEvent) []StreamEvent {
			k := len(evs) / 2
			evs[k].Data = strings.Replace(evs[k].Data, `"`, `" `, 1)
			return evs
		}, 0},
		{"an event 30s after the legacy host listed it", "stream event late", func(evs []StreamEvent) []StreamEvent {
			k := len(evs) / 2
			evs[k].At = evs[k].At.Add(30 * time.Second)
			return evs
		}, 0},
		{"the stream stalled: the subscriber stayed 10s longer and got nothing more", "stream event lost", func(evs []StreamEvent) []StreamEvent {
			return evs[:2]
		}, 10 * time.Second},
	} {
		t.Run("stream: "+tc.name, func(t *testing.T) {
			subs := slices.Clone(f.subs)
			subs[busiest].Events = tc.edit(slices.Clone(subs[busiest].Events))
			subs[busiest].Stop = subs[busiest].Stop.Add(tc.stay)
			res := f.checker([]string{"calm"}).CheckStreams(subs)
			found := false
			for _, v := range res.Violations {
				found = found || v.Rule == tc.rule
			}
			if !found {
				t.Fatalf("not caught as %q: %d violations %v", tc.rule, len(res.Violations), res.Violations)
			}
			t.Logf("caught:\n%s", res.Violations[0].String())
		})
	}
}

// upstreamOf is the upstream target of a client target, as the checker
// derives it.
func (f *fleet) upstreamOf(target string) string {
	path, q, _ := strings.Cut(target, "?")
	rt, param := route.NewTable().Match(path)
	req, err := rt.Validate(param, q)
	if err != nil {
		f.t.Fatal(err)
	}
	return upstreamTarget("/open-api"+req.UpstreamPath(), req.RawQuery)
}

// etagOf is the edge's ETag of an identity body, and of its gzip
// representation when gz (cache/entry.go: a 64-bit xxHash in hex, quoted;
// "-gzip" inside the quotes for gzip).
func etagOf(hash uint64, gz bool) string {
	s := strconv.FormatUint(hash, 16)
	for len(s) < 16 {
		s = "0" + s
	}
	if gz {
		return `"` + s + `-gzip"`
	}
	return `"` + s + `"`
}
