package cache

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// Page sizes of the benchmarks: a small page (a lookup), a 20-item list page
// and a 1000-event order book page.
var benchSizes = []struct {
	name string
	n    int
}{
	{"small", 300},
	{"20items", 8 << 10},
	{"1000events", 400 << 10},
}

func benchCache(b *testing.B, opt Options) *Cache {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// A clock that stands still: hits stay hits for the whole run.
	opt.Now = func() time.Time { return t0 }
	return newTestCache(b, Config{}, nil, opt)
}

// BenchmarkGetHit: the hit path, from all Ps at once, on one hot key and
// spread over 256 keys.
func BenchmarkGetHit(b *testing.B) {
	for _, size := range benchSizes {
		for _, keys := range []int{1, 256} {
			b.Run(fmt.Sprintf("%s/keys=%d", size.name, keys), func(b *testing.B) {
				c := benchCache(b, Options{})
				body := page(size.n, 1)
				names := make([]string, keys)
				for i := range names {
					names[i] = "orderbook_events|tokenId=" + strconv.Itoa(i)
					mustGetB(b, c, names[i], body)
				}
				var next atomic.Uint64
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := next.Add(1)
					ctx := context.Background()
					for pb.Next() {
						i++
						e, st, err := c.get(ctx, names[i%uint64(keys)], nil)
						if err != nil || st != Hit || len(e.Body()) == 0 {
							b.Fatalf("%v %v", st, err)
						}
					}
				})
			})
		}
	}
}

func mustGetB(b *testing.B, c *Cache, key string, body []byte) {
	b.Helper()
	if _, _, err := c.get(context.Background(), key, func(context.Context, func() bool) ([]byte, Facts, error) {
		return body, liveFacts, nil
	}); err != nil {
		b.Fatal(err)
	}
}

// missBench is a cache for a benchmark of misses and a fetch of an n-byte
// page that costs nothing.
func missBench(b *testing.B, n int, opt Options) (*Cache, Fetch) {
	c := benchCache(b, opt)
	body := page(n, 1)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	return c, func(context.Context, func() bool) ([]byte, Facts, error) { return body, liveFacts, nil }
}

// BenchmarkGetMiss: the miss path on unique keys with a fetch that costs
// nothing, so what is measured is the cache's own work: flight, policy,
// ETag, Set and Wait (the gzip copy waits for the first gzip hit). fresh
// hands each flight to a runner; inline runs it on the caller's goroutine
// (Options.Inline), as an HTTP/1.1 request's is.
func BenchmarkGetMiss(b *testing.B) {
	for _, size := range benchSizes {
		for _, way := range []struct {
			name string
			opt  Options
		}{
			{"fresh", Options{}},
			{"inline", Options{Inline: func(context.Context) bool { return true }}},
		} {
			b.Run(size.name+"/"+way.name, func(b *testing.B) {
				c, fetch := missBench(b, size.n, way.opt)
				ctx := context.Background()
				i := 0
				for b.Loop() {
					i++
					if _, st, err := c.get(ctx, "k"+strconv.Itoa(i), fetch); err != nil || st != Miss {
						b.Fatalf("%v %v", st, err)
					}
				}
			})
		}
	}
}

// BenchmarkFirstGzipHit: the hit that makes an entry's gzip copy and
// charges it to the store (forms.go), the cost a miss does not pay, less
// the lookup. The miss that stores each entry runs outside the timer.
func BenchmarkFirstGzipHit(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			c, fetch := missBench(b, size.n, Options{})
			ctx := context.Background()
			i := 0
			for b.Loop() {
				i++
				key := "k" + strconv.Itoa(i)
				b.StopTimer()
				e, st, err := c.get(ctx, key, fetch)
				if err != nil || st != Miss {
					b.Fatalf("%v %v", st, err)
				}
				b.StartTimer()
				// The entry the miss returned: a Get would find it unless
				// ristretto has evicted it by now (the run inserts more
				// than max_bytes); the lookup itself is BenchmarkGetHit.
				if e.GzipBody() == nil && size.n > defaultCompressMinBytes {
					b.Fatal("no gzip copy")
				}
			}
		})
	}
}

// BenchmarkCompress: the gzip copy, at each level.
func BenchmarkCompress(b *testing.B) {
	var z compressor
	for _, size := range benchSizes[1:] {
		body := page(size.n, 1)
		b.Run(size.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var out []byte
			for b.Loop() {
				out = z.gzip(body)
			}
			b.ReportMetric(float64(len(out))/float64(len(body)), "ratio")
		})
	}
}
