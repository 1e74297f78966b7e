package legacysim

import "math/rand/v2"

// Every part of the data draws from its own PCG stream keyed by (Seed,
// label, index). Parts generated lazily (a token's book on first use, a
// transaction's counterparties on lookup) therefore see the same numbers in
// whatever order they are built, and the same Seed gives the same bytes.
const (
	streamMarkets uint64 = iota + 1
	streamWallet
	streamBook
	streamFills
	streamBookVariety
	streamLiveBook // live mode (live.go)
	streamLiveActivity
	streamLiveTransfers
)

// mix64 is the splitmix64 finalizer: a cheap bijective scrambler, used to
// derive stream keys and per-event hashes without a generator.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

type prng struct{ *rand.Rand }

func newPRNG(seed, label, index uint64) prng {
	return prng{rand.New(rand.NewPCG(mix64(seed), mix64(mix64(label)^index)))}
}

// between returns a uniform int64 in [lo, hi]; hi < lo yields lo.
func (r prng) between(lo, hi int64) int64 {
	if hi <= lo {
		return lo
	}
	return lo + r.Int64N(hi-lo+1)
}

// hexID returns "0x" followed by 2*n lower-case hex digits: n = 20 is an
// address, n = 32 a transaction hash or condition id
// (docs/CONTRACT.md#conventions).
func (r prng) hexID(n int) string {
	b := make([]byte, 2, 2+2*n)
	b[0], b[1] = '0', 'x'
	var u uint64
	for i := range n {
		if i%8 == 0 {
			u = r.Uint64()
		}
		c := byte(u)
		u >>= 8
		b = append(b, hexDigits[c>>4], hexDigits[c&15])
	}
	return string(b)
}

// digits returns an n-digit decimal string without a leading zero, the form
// of outcome token ids and combo position ids.
func (r prng) digits(n int) string {
	b := make([]byte, n)
	b[0] = byte('1' + r.IntN(9))
	for i := 1; i < n; i++ {
		b[i] = byte('0' + r.IntN(10))
	}
	return string(b)
}

// appendHash appends "0x" and 64 hex digits derived from k without a
// generator, for per-event values (order book sourceHash) that are encoded
// on the fly rather than stored.
func appendHash(dst []byte, k uint64) []byte {
	dst = append(dst, '0', 'x')
	for i := range uint64(4) {
		u := mix64(k + i*0x632be59bd9b4e019)
		for range 8 {
			c := byte(u >> 56)
			u <<= 8
			dst = append(dst, hexDigits[c>>4], hexDigits[c&15])
		}
	}
	return dst
}
