package load

import (
	"math"
	"math/bits"
	"time"
)

// Histogram is a log-linear latency histogram in the manner of
// HdrHistogram: values (nanoseconds) below 256 are kept exactly, larger ones
// in buckets 1/128 of their power of two wide, so every percentile it
// reports is within 0.4% of a recorded value's true size. It has a fixed
// size and Record never allocates, so one per connection costs the load
// generator nothing measurable; Merge adds them up at the end.
type Histogram struct {
	counts   [numBuckets]uint64
	n        uint64
	sum      float64
	min, max int64
}

const (
	subBits = 7 // 128 sub-buckets per power of two
	subN    = 1 << subBits
	// maxValue bounds what is recorded (about 18 minutes in nanoseconds);
	// larger values are clamped to it.
	maxValue   = 1<<40 - 1
	numBuckets = (40-subBits-1)*subN + 2*subN
)

// bucketOf maps a value to its bucket: exact below 2*subN, else the top
// subBits+1 significant bits select the bucket within its power of two.
func bucketOf(v int64) int {
	if v < 2*subN {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - (subBits + 1)
	return shift*subN + int(v>>shift)
}

// bucketRange returns the smallest value of bucket i and its width.
func bucketRange(i int) (lo, width int64) {
	if i < 2*subN {
		return int64(i), 1
	}
	shift := i/subN - 1
	return int64(i-shift*subN) << shift, 1 << shift
}

// Record adds one latency. Negative values count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := min(max(int64(d), 0), maxValue)
	h.counts[bucketOf(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

// Merge adds o's values to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// Percentile returns the value below or at which p percent of the values
// lie (nearest rank), as the middle of its bucket, clamped to the smallest
// and largest value seen. Zero when empty.
func (h *Histogram) Percentile(p float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(p / 100 * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, w := bucketRange(i)
			return time.Duration(min(max(lo+(w-1)/2, h.min), h.max))
		}
	}
	return time.Duration(h.max)
}

// Mean is the arithmetic mean of the values; zero when empty.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// Max is the largest value recorded.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }
