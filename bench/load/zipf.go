package load

import (
	"math"
	"math/rand/v2"
	"sort"
)

// Zipf draws ranks 0..n-1 with P(rank k) proportional to 1/(k+1)^s. Unlike
// math/rand/v2's Zipf it accepts any s > 0, so the classic s = 1 of web
// request popularity can be used; it keeps the cumulative distribution
// (8 bytes a key) and draws by binary search.
type Zipf struct {
	cdf []float64
}

// NewZipf prepares the distribution over n ranks; n < 1 is taken as 1 and
// s <= 0 as 1.
func NewZipf(n int, s float64) *Zipf {
	n = max(n, 1)
	if !(s > 0) {
		s = 1
	}
	cdf := make([]float64, n)
	sum := 0.0
	for k := range n {
		sum += math.Pow(float64(k+1), -s)
		cdf[k] = sum
	}
	for k := range cdf {
		cdf[k] /= sum
	}
	return &Zipf{cdf: cdf}
}

// Rank draws one rank with r. A Zipf is read-only once built, so
// connections share it and each brings its own r.
func (z *Zipf) Rank(r *rand.Rand) int {
	u := r.Float64()
	return min(sort.SearchFloat64s(z.cdf, u), len(z.cdf)-1)
}

// P returns the probability of rank k.
func (z *Zipf) P(k int) float64 {
	if k == 0 {
		return z.cdf[0]
	}
	return z.cdf[k] - z.cdf[k-1]
}
