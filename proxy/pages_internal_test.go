package proxy

import (
	"testing"
	"time"

	"tradergate/cache"
)

// TestHitMemo: hits at the same age share one set of fields, made once;
// another age, status or immutability gets fields of its own, with the
// values appendAgeFields makes.
func TestHitMemo(t *testing.T) {
	var m hitMemo
	stored := time.Unix(1_800_000_000, 0)
	e := &cache.Entry{Stored: stored, TTL: 24 * time.Hour, Immutable: true}
	at := stored.Add(90600 * time.Millisecond)
	n := ageNumbersOf(e, at)
	f := m.fields(e.Immutable, cache.Hit, n)
	if g := m.fields(e.Immutable, cache.Hit, ageNumbersOf(e, at.Add(300*time.Millisecond))); g != f {
		t.Error("two hits in the same second made their fields twice")
	}
	for _, tc := range []struct {
		name      string
		immutable bool
		status    cache.Status
		n         ageNumbers
	}{
		{"older", true, cache.Hit, ageNumbersOf(e, at.Add(time.Second))},
		{"stale", true, cache.Stale, n},
		{"not immutable", false, cache.Hit, n},
	} {
		g := m.fields(tc.immutable, tc.status, tc.n)
		if g == f {
			t.Errorf("%s: got the fields of another hit", tc.name)
		}
		b, cc, cs := appendAgeFields(nil, tc.immutable, tc.status, tc.n)
		if g.values != string(b) || int(g.cc) != cc || int(g.cs) != cs {
			t.Errorf("%s: fields %q (%d, %d), want %q (%d, %d)", tc.name, g.values, g.cc, g.cs, b, cc, cs)
		}
	}
	if got, want := f.values[:f.cc], "90"; got != want {
		t.Errorf("Age %q, want %q", got, want)
	}
	if got, want := f.values[f.cc:f.cs], "private, max-age=86309, immutable"; got != want {
		t.Errorf("Cache-Control %q, want %q", got, want)
	}
}
