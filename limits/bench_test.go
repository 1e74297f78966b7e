package limits

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"tradergate/internal/testkit/redistest"
)

// BenchmarkTake measures the limiter's cost per request:
// go test -bench Take -benchmem ./limits/
// The allowance is never spent, so every Take goes the whole way.
func BenchmarkTake(b *testing.B) {
	plan := Plan{Requests: 1 << 40, Window: time.Minute}
	stores := []struct {
		name string
		opt  func(b *testing.B) Options
	}{
		{"memory", func(*testing.B) Options { return Options{} }},
		{"redis", func(b *testing.B) Options {
			return shared(b, []string{redistest.Start(b).Addr()}, time.Second, Options{})
		}},
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			l := newLimiter(b, Config{}, st.opt(b))
			b.Run("serial", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if d := take(l, "key:bench", plan, "free"); !d.Allowed {
						b.Fatal(d)
					}
				}
			})
			// A key's request as the edge makes it: the bucket kept, the
			// decision written out as header fields.
			b.Run("kept-bucket-with-fields", func(b *testing.B) {
				bucket := NewBucket("key:kept")
				buf := make([]byte, 0, 192)
				var n int
				b.ReportAllocs()
				for b.Loop() {
					now := time.Now()
					d := l.TakeAt(bg, now, bucket, plan, "free")
					buf = buf[:0]
					d.AppendHeaders(&buf, now, func(_, v string) { n += len(v) })
				}
				if n == 0 {
					b.Fatal("no fields written")
				}
			})
			// Many keys at once: one bucket per goroutine.
			b.Run("parallel", func(b *testing.B) {
				b.ReportAllocs()
				var id atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					bucket := "key:bench" + strconv.FormatInt(id.Add(1), 10)
					for pb.Next() {
						if d := take(l, bucket, plan, "free"); !d.Allowed {
							b.Error(d)
							return
						}
					}
				})
			})
			// One hot key from every goroutine: contention on one counter.
			b.Run("parallel-hotkey", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if d := take(l, "key:hot", plan, "free"); !d.Allowed {
							b.Error(d)
							return
						}
					}
				})
			})
		})
	}
}

// BenchmarkShieldAcquire is the shield's cost on a call that does not wait.
func BenchmarkShieldAcquire(b *testing.B) {
	s := NewShield(ShieldConfig{MaxConcurrent: 1 << 20, PerSecond: 1e12})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			release, err := s.Acquire(bg)
			if err != nil {
				b.Error(err)
				return
			}
			release()
		}
	})
}

func BenchmarkClientIP(b *testing.B) {
	l := newLimiter(b, Config{TrustedProxies: []string{"10.0.0.0/8"}}, Options{})
	r := newRequest("10.1.2.3:80", "198.51.100.1, 10.0.0.9")
	b.ReportAllocs()
	for b.Loop() {
		clientIP(l, r)
	}
}
