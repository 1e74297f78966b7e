package cache

import (
	"context"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// cpuPerOp reports the process's CPU time (user + system) per op from the
// moment it is called: with a Redis round trip in each op, ns/op is mostly
// waiting, and the CPU is what a replica pays. Redis's own CPU is not in it.
func cpuPerOp(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() { b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op") }
}

// BenchmarkL2Hit: a Get whose L1 is cold and whose L2 is warm (GET, decode,
// L1 insert), against a miss through the shared tier (GET, lease, fetch,
// gzip, SET + release + notice) and, with the L2 off, a miss and an L1 hit
// (BenchmarkGetMiss, BenchmarkGetHit). The fetch costs nothing. Run with a
// fixed count: every iteration adds a key to Redis.
func BenchmarkL2Hit(b *testing.B) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, size := range benchSizes {
		body := page(size.n, 1)
		fetch := func(context.Context, func() bool) ([]byte, Facts, error) { return body, liveFacts, nil }
		ctx := context.Background()
		b.Run(size.name+"/l2hit", func(b *testing.B) {
			f := newFleet(b, 2, Config{}, Options{})
			f.clk.Set(t0)
			for i := range b.N {
				mustGetB(b, f.cs[1], "k"+strconv.Itoa(i), body)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			defer cpuPerOp(b)()
			for i := range b.N {
				if _, st, err := f.cs[0].get(ctx, "k"+strconv.Itoa(i), fetch); err != nil || st != HitL2 {
					b.Fatalf("%v %v", st, err)
				}
			}
		})
		b.Run(size.name+"/l2miss", func(b *testing.B) {
			f := newFleet(b, 1, Config{}, Options{})
			f.clk.Set(t0)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			defer cpuPerOp(b)()
			for i := range b.N {
				if _, st, err := f.cs[0].get(ctx, "k"+strconv.Itoa(i), fetch); err != nil || st != Miss {
					b.Fatalf("%v %v", st, err)
				}
			}
		})
	}
}

var mgetCalls = regexp.MustCompile(`cmdstat_mget:calls=(\d+)`)

// BenchmarkL2Wake: how long after the holder's fetch returns a waiter on
// another replica has the page, woken by the notice, and how many peeks
// (MGET) each wait costs Redis.
func BenchmarkL2Wake(b *testing.B) {
	for _, mode := range []string{"notice"} {
		b.Run(mode, func(b *testing.B) {
			f := newFleet(b, 2, Config{}, Options{})
			peeks := func() int {
				info, _ := f.rdb.Info(context.Background(), "commandstats").Result()
				m := mgetCalls.FindStringSubmatch(info)
				if m == nil {
					return 0
				}
				n, _ := strconv.Atoi(m[1])
				return n
			}
			before := peeks()
			var wake time.Duration
			for i := range b.N {
				key := "k" + strconv.Itoa(i)
				waits := f.cs[1].Stats().L2LockWaits
				released := make(chan time.Time, 1)
				done := make(chan struct{})
				go func() {
					defer close(done)
					_, _, _ = f.cs[0].get(context.Background(), key, func(context.Context, func() bool) ([]byte, Facts, error) {
						for f.cs[1].Stats().L2LockWaits == waits {
							time.Sleep(time.Millisecond)
						}
						// Let the waiter settle into its wait.
						time.Sleep(5 * time.Millisecond)
						released <- time.Now()
						return []byte("page"), liveFacts, nil
					})
				}()
				// Give the holder's flight the lease first.
				for f.cs[0].Stats().Fetches == uint64(i) {
					time.Sleep(100 * time.Microsecond)
				}
				_, st, err := f.cs[1].get(context.Background(), key, nil)
				end := time.Now()
				if err != nil || st != MissL2 {
					b.Fatalf("%v %v", st, err)
				}
				wake += end.Sub(<-released)
				<-done
			}
			b.ReportMetric(float64(wake.Microseconds())/float64(b.N), "wake-us")
			b.ReportMetric(float64(peeks()-before)/float64(b.N), "peeks/wait")
		})
	}
}
