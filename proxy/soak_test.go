package proxy_test

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"tradergate/proxy/config"
)

// soakFor is how long TestSoak runs: two minutes under CI without the race
// detector (.ci/run runs it so, on its own), 15 s otherwise; -soak=30m
// runs it longer.
var soakFor = flag.Duration("soak", 0, "how long TestSoak runs (0: 2m under CI without -race, else 15s)")

// TestSoak runs mixed traffic against the edge for a bounded time: hits,
// misses, bad requests, slow clients that give up, and reloads. At the end
// no request was lost, none got a status it should not, and the process's
// goroutines and resident memory stayed flat after the warm-up (within
// 10%; memory is judged without the race detector, whose own bookkeeping
// grows with the run).
func TestSoak(t *testing.T) {
	d := *soakFor
	if d == 0 {
		d = 15 * time.Second
		if os.Getenv("CI") != "" && !raceEnabled {
			d = 2 * time.Minute
		}
	}
	// A small cache, full within the warm-up: after it the edge's memory
	// must hold still, not grow toward a cache bound far away.
	e := newEdge(t, withLimitedKey(1<<40, time.Hour), withConfig(func(c *config.Config) { c.Cache.MaxBytes = 4 << 20 }))
	sim := e.sim
	hits := []string{"/v1/tx/" + sim.TradeTxs()[0], "/v1/trader/" + sim.Wallets()[0] + "/positions/closed"}
	var (
		sent, answered, unexpected atomic.Int64
		missN                      atomic.Int64
		stop                       = make(chan struct{})
		wg                         sync.WaitGroup
		mu                         sync.Mutex
		odd                        []string
	)
	check := func(kind string, status int, ok ...int) {
		answered.Add(1)
		for _, s := range ok {
			if s == status {
				return
			}
		}
		unexpected.Add(1)
		mu.Lock()
		if len(odd) < 10 {
			odd = append(odd, fmt.Sprintf("%s: %d", kind, status))
		}
		mu.Unlock()
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 20 * time.Second}
	defer client.CloseIdleConnections()
	get := func(path string) (int, error) {
		req, _ := http.NewRequest(http.MethodGet, e.front.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+keyLimited)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	worker := func(kind string, each func() (string, []int)) {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				path, ok := each()
				sent.Add(1)
				status, err := get(path)
				if err != nil {
					t.Errorf("%s %s: %v", kind, path, err)
					return
				}
				check(kind, status, ok...)
			}
		})
	}
	for i := range 3 {
		worker("hit", func() (string, []int) { return hits[i%len(hits)], []int{200} })
	}
	worker("miss", func() (string, []int) {
		return fmt.Sprintf("/v1/tx/0x%064x", missN.Add(1)), []int{200}
	})
	worker("bad", func() (string, []int) { return "/v1/trader/0xnothex/activity", []int{400} })
	wg.Go(func() { // slow clients that give up mid-request
		for {
			select {
			case <-stop:
				return
			default:
			}
			if c, err := net.Dial("tcp", e.addr); err == nil {
				_, _ = c.Write([]byte("GET " + hits[0] + " HTTP/1.1\r\nHost: x\r\n"))
				time.Sleep(50 * time.Millisecond) // a slow client: the load under test
				c.Close()
			}
		}
	})
	wg.Go(func() { // reloads
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				cfg := *e.cfg
				if err := e.srv.Reload(&cfg); err != nil {
					t.Errorf("reload: %v", err)
				}
			}
		}
	})

	// The soak's length is what it tests (growth over time under load):
	// these sleeps are its duration, not synchronisation.
	warm := min(d/4, 30*time.Second)
	time.Sleep(warm)
	g0, rss0 := runtime.NumGoroutine(), heldRSS()
	time.Sleep(d - warm - 2*rssGap)
	g1, rss1 := runtime.NumGoroutine(), heldRSS()
	close(stop)
	wg.Wait()

	t.Logf("soak %v: %d requests sent, %d answered, %d unexpected; goroutines %d -> %d, RSS %d -> %d KiB, legacy calls %d",
		d, sent.Load(), answered.Load(), unexpected.Load(), g0, g1, rss0, rss1, sim.Stats().Requests)
	if sent.Load() != answered.Load() {
		t.Errorf("%d requests lost", sent.Load()-answered.Load())
	}
	if unexpected.Load() != 0 {
		t.Errorf("%d unexpected statuses, e.g. %v", unexpected.Load(), odd)
	}
	if float64(g1) > 1.1*float64(g0)+5 {
		t.Errorf("goroutines grew from %d to %d", g0, g1)
	}
	if !raceEnabled && rss0 > 0 && float64(rss1) > 1.1*float64(rss0) {
		t.Errorf("RSS grew from %d to %d KiB", rss0, rss1)
	}
}

// rssGap spaces heldRSS's readings.
const rssGap = time.Second

// heldRSS is the least of three settled readings rssGap apart, taken
// while the load runs: one reading holds whatever the requests in flight
// held at that moment (in CI runs it swung from 4% to 10% above the
// warm-up's over the same soak), while memory the edge keeps raises
// every reading.
func heldRSS() int64 {
	least := settledRSS()
	for range 2 {
		time.Sleep(rssGap)
		least = min(least, settledRSS())
	}
	return least
}

// settledRSS is the resident memory once the collector has run and given
// back what it can, so that two readings compare what is held.
func settledRSS() int64 {
	runtime.GC()
	debug.FreeOSMemory()
	return rssKB()
}

// rssKB is this process's resident memory, or 0 where /proc has none.
func rssKB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}
