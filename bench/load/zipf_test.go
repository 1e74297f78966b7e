package load

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestZipfDistribution(t *testing.T) {
	const n, draws = 1000, 200000
	z := NewZipf(n, 1)
	// Harmonic number H_1000 ≈ 7.4855: P(rank 0) = 1/H.
	if p0 := z.P(0); math.Abs(p0-1/7.4855) > 1e-3 {
		t.Fatalf("P(0) = %v, want about %v", p0, 1/7.4855)
	}
	r := rand.New(rand.NewPCG(1, 2))
	counts := make([]int, n)
	for range draws {
		k := z.Rank(r)
		if k < 0 || k >= n {
			t.Fatalf("rank %d out of range", k)
		}
		counts[k]++
	}
	for _, k := range []int{0, 1, 9} {
		want := z.P(k) * draws
		if math.Abs(float64(counts[k])-want) > 5*math.Sqrt(want) {
			t.Errorf("rank %d drawn %d times, want about %.0f", k, counts[k], want)
		}
	}
	if !(counts[0] > counts[1] && counts[1] > counts[9] && counts[9] > counts[500]) {
		t.Errorf("popularity does not fall with rank: %d %d %d %d", counts[0], counts[1], counts[9], counts[500])
	}
}

func TestZipfRepeatable(t *testing.T) {
	z := NewZipf(10000, 1.1)
	a, b := rand.New(rand.NewPCG(7, 0)), rand.New(rand.NewPCG(7, 0))
	for range 1000 {
		if x, y := z.Rank(a), z.Rank(b); x != y {
			t.Fatalf("same seed, different draws: %d vs %d", x, y)
		}
	}
}

func TestZipfDegenerate(t *testing.T) {
	z := NewZipf(0, -1) // one rank, default exponent
	r := rand.New(rand.NewPCG(1, 1))
	if k := z.Rank(r); k != 0 || z.P(0) != 1 {
		t.Fatalf("rank %d, P(0) %v", k, z.P(0))
	}
}
