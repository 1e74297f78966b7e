package load

import (
	"math"
	"testing"
	"time"
)

func TestHistogramRelativeError(t *testing.T) {
	var h Histogram
	const n = 100000
	for i := 1; i <= n; i++ {
		h.Record(time.Duration(i) * time.Microsecond) // 1µs .. 100ms, uniform
	}
	for _, p := range []float64{50, 90, 99, 99.9} {
		want := p / 100 * n * float64(time.Microsecond)
		got := float64(h.Percentile(p))
		if e := math.Abs(got-want) / want; e > 0.002 {
			t.Errorf("p%v = %v, want %v within 0.2%% (error %.3f%%)", p, time.Duration(got), time.Duration(want), 100*e)
		}
	}
	if h.Count() != n {
		t.Errorf("count %d, want %d", h.Count(), n)
	}
	if m := h.Mean(); math.Abs(float64(m)-50.0005e6)/50e6 > 0.002 {
		t.Errorf("mean %v, want about 50ms", m)
	}
}

// The load generator keeps one histogram per connection and merges them:
// the merged percentiles must be those of all the values recorded in one.
func TestHistogramMergeEqualsOne(t *testing.T) {
	var all Histogram
	parts := make([]Histogram, 7)
	for i := range 70000 {
		d := time.Duration(20+i%997*13) * time.Microsecond
		if i%1000 == 0 {
			d = time.Duration(i) * time.Microsecond // a tail
		}
		all.Record(d)
		parts[i%len(parts)].Record(d)
	}
	var merged Histogram
	merged.Merge(&Histogram{}) // an empty one adds nothing
	for i := range parts {
		merged.Merge(&parts[i])
	}
	if merged.Count() != all.Count() {
		t.Fatalf("count %d, want %d", merged.Count(), all.Count())
	}
	for _, p := range []float64{0, 50, 99, 99.9, 99.99, 100} {
		if a, m := all.Percentile(p), merged.Percentile(p); a != m {
			t.Errorf("p%v: merged %v, one histogram %v", p, m, a)
		}
	}
	if all.Max() != merged.Max() || all.Mean() != merged.Mean() {
		t.Errorf("max %v/%v mean %v/%v", merged.Max(), all.Max(), merged.Mean(), all.Mean())
	}
}

func TestHistogramClampAndEmpty(t *testing.T) {
	var a Histogram
	a.Record(-5)
	a.Record(100 * time.Hour) // clamped to the highest value
	if a.Count() != 2 || a.Percentile(0) > time.Duration(histLowest) || a.Max() < time.Duration(histHighest) {
		t.Errorf("count %d min %v max %v", a.Count(), a.Percentile(0), a.Max())
	}
	var empty Histogram
	if empty.Percentile(99) != 0 || empty.Mean() != 0 || empty.Max() != 0 || empty.Count() != 0 {
		t.Error("empty histogram should report zeros")
	}
	var into Histogram
	into.Merge(&empty)
	if into.Count() != 0 {
		t.Error("merging an empty histogram recorded something")
	}
}
