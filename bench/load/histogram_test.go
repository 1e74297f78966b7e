package load

import (
	"math"
	"testing"
	"time"
)

func TestHistogramExactBelow256(t *testing.T) {
	var h Histogram
	for v := 1; v <= 200; v++ {
		h.Record(time.Duration(v))
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 100}, {99, 198}, {100, 200}, {0.1, 1}} {
		if got := h.Percentile(tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if h.n != 200 || h.Max() != 200 || h.Mean() != 100 {
		t.Errorf("count %d max %v mean %v", h.n, h.Max(), h.Mean())
	}
}

func TestHistogramRelativeError(t *testing.T) {
	var h Histogram
	const n = 100000
	for i := 1; i <= n; i++ {
		h.Record(time.Duration(i) * time.Microsecond) // 1µs .. 100ms, uniform
	}
	for _, p := range []float64{50, 90, 99, 99.9} {
		want := p / 100 * n * float64(time.Microsecond)
		got := float64(h.Percentile(p))
		if e := math.Abs(got-want) / want; e > 0.005 {
			t.Errorf("p%v = %v, want %v within 0.5%% (error %.3f%%)", p, time.Duration(got), time.Duration(want), 100*e)
		}
	}
}

func TestHistogramBuckets(t *testing.T) {
	// Every bucket's range starts where the previous one ended, and every
	// value maps into the bucket whose range holds it.
	next := int64(0)
	for i := range numBuckets {
		lo, w := bucketRange(i)
		if lo != next {
			t.Fatalf("bucket %d starts at %d, want %d", i, lo, next)
		}
		for _, v := range []int64{lo, lo + w - 1} {
			if b := bucketOf(v); b != i {
				t.Fatalf("value %d in bucket %d, want %d", v, b, i)
			}
		}
		next = lo + w
	}
	if next <= maxValue {
		t.Fatalf("buckets end at %d, below maxValue %d", next, maxValue)
	}
}

func TestHistogramMergeAndClamp(t *testing.T) {
	var a, b Histogram
	a.Record(10 * time.Millisecond)
	b.Record(-5)
	b.Record(100 * time.Hour) // clamped
	a.Merge(&b)
	a.Merge(&Histogram{})
	if a.n != 3 || a.Percentile(0) != 0 || a.Max() != maxValue {
		t.Errorf("count %d min %v max %v", a.n, a.Percentile(0), a.Max())
	}
	var empty Histogram
	if empty.Percentile(99) != 0 || empty.Mean() != 0 {
		t.Error("empty histogram should report zeros")
	}
}
