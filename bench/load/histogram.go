package load

import (
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram is a latency histogram: HdrHistogram (hdrhistogram-go) with
// three significant digits, so every percentile it reports is within 0.1%
// of a recorded value, from 1µs to a minute. Its zero value is empty and
// ready; the counts are allocated on the first Record (about 150 KB), so
// one per connection costs the load generator nothing on the hot path:
// Record never allocates after that, and Merge adds them up at the end.
type Histogram struct {
	h *hdr.Histogram
}

const (
	// histLowest is the smallest value told apart (1µs); values below it
	// share its bucket. Every latency the benchmark measures on loopback
	// is tens of microseconds or more.
	histLowest = int64(time.Microsecond)
	// histHighest bounds what is recorded; larger values are clamped to
	// it. A request's timeout (Spec.Timeout) is well below.
	histHighest = int64(time.Minute)
	histDigits  = 3
)

func (h *Histogram) init() {
	if h.h == nil {
		h.h = hdr.New(histLowest, histHighest, histDigits)
	}
}

// Record adds one latency. Negative values count as zero, values above a
// minute as a minute.
func (h *Histogram) Record(d time.Duration) {
	h.init()
	// Within the range the library cannot refuse a value.
	_ = h.h.RecordValue(min(max(int64(d), 0), histHighest))
}

// Merge adds o's values to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.h == nil || o.h.TotalCount() == 0 {
		return
	}
	h.init()
	// Same geometry on both sides: nothing is dropped.
	h.h.Merge(o.h)
}

// Count is how many values were recorded.
func (h *Histogram) Count() int64 {
	if h.h == nil {
		return 0
	}
	return h.h.TotalCount()
}

// Percentile returns the value below or at which p percent of the values
// lie (the highest value equivalent to it at the histogram's precision,
// as HdrHistogram reports it), never above the largest value seen. Zero
// when empty.
func (h *Histogram) Percentile(p float64) time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return time.Duration(min(h.h.ValueAtPercentile(p), h.h.Max()))
}

// Mean is the arithmetic mean of the values; zero when empty.
func (h *Histogram) Mean() time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return time.Duration(h.h.Mean())
}

// Max is the largest value recorded (at the histogram's precision).
func (h *Histogram) Max() time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return time.Duration(h.h.Max())
}
