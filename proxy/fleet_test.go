package proxy_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tradergate/internal/testkit"
	"tradergate/internal/testkit/redistest"
	"tradergate/legacysim"
	"tradergate/proxy/config"
)

// fleetOf starts n replicas over one Redis, in front of one legacy host.
// Each has its own page cache; what they share goes through Redis. opts
// apply after withRedis, so that a test's own redis settings (a shorter
// redis.timeout) hold.
func fleetOf(t *testing.T, n int, redisAddr string, opts ...edgeOption) []*edge {
	t.Helper()
	opts = append([]edgeOption{withRedis(redisAddr)}, opts...)
	first := newEdge(t, opts...)
	fleet := []*edge{first}
	for len(fleet) < n {
		fleet = append(fleet, newEdge(t, append(opts, withUpstreamOf(first))...))
	}
	return fleet
}

// One quota per key across the fleet: 300 requests of one key, spread
// over 3 replicas, against an allowance of 100.
func TestFleetSharesOneQuota(t *testing.T) {
	r := redistest.Start(t)
	fleet := fleetOf(t, 3, r.Addr(), withLimitedKey(100, time.Minute))
	path := "/v1/tx/" + fleet[0].sim.TradeTxs()[0]
	var (
		mu     sync.Mutex
		counts = map[int]int{}
		wg     sync.WaitGroup
	)
	for i := range 300 {
		e := fleet[i%len(fleet)]
		wg.Go(func() {
			resp, _ := e.do(http.MethodGet, path, "Authorization", "Bearer "+keyLimited)
			mu.Lock()
			counts[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if counts[200] != 100 || counts[429] != 200 {
		t.Errorf("statuses %v, want exactly 100 served and 200 refused across the fleet", counts)
	}
}

// withClusterRedis points the edge at a Redis Cluster.
func withClusterRedis(addrs []string) edgeOption {
	return withConfig(func(c *config.Config) {
		c.Redis.Addrs = addrs
		c.Redis.Timeout = 2 * time.Second
	})
}

// stampede sends n concurrent requests for path, spread round-robin over
// the replicas, and returns the statuses seen.
func stampede(fleet []*edge, n int, path string) map[int]int {
	var (
		mu     sync.Mutex
		counts = map[int]int{}
		wg     sync.WaitGroup
	)
	for i := range n {
		e := fleet[i%len(fleet)]
		wg.Go(func() {
			resp, _ := e.get(path)
			mu.Lock()
			counts[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return counts
}

// The fleet acts as one edge: 150 concurrent requests for one cold page,
// spread over 3 replicas, make one legacy call; a page one replica fetched
// is served by the others without one.
func TestFleetOneUpstreamCallPerPage(t *testing.T) {
	r := redistest.Start(t)
	fleet := fleetOf(t, 3, r.Addr())
	sim := fleet[0].sim
	path := "/v1/trader/" + sim.Wallets()[1] + "/activity?limit=13"
	if counts := stampede(fleet, 150, path); counts[200] != 150 {
		t.Fatalf("statuses %v", counts)
	}
	if got := sim.Stats().Requests; got != 1 {
		t.Errorf("150 requests over 3 replicas made %d legacy calls, want 1", got)
	}

	tx := "/v1/tx/" + sim.TradeTxs()[2]
	resp, body := fleet[0].get(tx)
	if resp.StatusCode != 200 || resp.Header.Get("X-Cache") != "MISS" {
		t.Fatalf("replica 1: %d %s", resp.StatusCode, resp.Header.Get("X-Cache"))
	}
	before := sim.Stats().Requests
	for i, e := range fleet[1:] {
		r2, b2 := e.get(tx)
		if r2.StatusCode != 200 || string(b2) != string(body) {
			t.Errorf("replica %d: %d, body differs", i+2, r2.StatusCode)
		}
		if got := r2.Header.Get("Cache-Status"); !strings.HasPrefix(got, "tradergate-l2; hit") || r2.Header.Get("X-Cache") != "HIT" {
			t.Errorf("replica %d: X-Cache %q, Cache-Status %q", i+2, r2.Header.Get("X-Cache"), got)
		}
	}
	if got := sim.Stats().Requests; got != before {
		t.Errorf("replicas 2 and 3 made %d legacy calls for a page replica 1 held", got-before)
	}
}

// The same over a 3-master Redis Cluster, with pages whose keys land on
// every master.
func TestFleetOverARedisCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	first := newEdge(t, withClusterRedis(c.Addrs()))
	fleet := []*edge{first,
		newEdge(t, withClusterRedis(c.Addrs()), withUpstreamOf(first)),
		newEdge(t, withClusterRedis(c.Addrs()), withUpstreamOf(first))}
	sim := first.sim
	paths := []string{}
	for _, w := range sim.Wallets()[:6] {
		paths = append(paths, "/v1/trader/"+w+"/positions/closed")
	}
	for _, tx := range sim.TradeTxs()[:6] {
		paths = append(paths, "/v1/tx/"+tx)
	}
	for _, p := range paths {
		if counts := stampede(fleet, 30, p); counts[200] != 30 {
			t.Fatalf("%s: %v", p, counts)
		}
	}
	if got := sim.Stats().Requests; got != int64(len(paths)) {
		seen := map[string]int{}
		for _, rq := range sim.Recent() {
			seen[rq.Path]++
		}
		for i, e := range fleet {
			st := e.srv.CacheStats()
			t.Logf("replica %d: l2 hits %d misses %d errors %d waits %d wait timeouts %d", i+1, st.L2Hits, st.L2Misses, st.L2Errors, st.L2LockWaits, st.L2LockWaitTimeouts)
		}
		t.Errorf("%d pages over 3 replicas made %d legacy calls, want one each: %v", len(paths), got, seen)
	}
	// Every master holds some of the pages.
	ctx := context.Background()
	for _, addr := range c.Addrs() {
		rc := redis.NewClient(&redis.Options{Addr: addr})
		keys, err := rc.Keys(ctx, "tradergate:page:*").Result()
		_ = rc.Close()
		if err != nil || len(keys) == 0 {
			t.Errorf("master %s holds no page (%v)", addr, err)
		}
	}
}

// A Zipf mix over 3 replicas costs the legacy host about what it costs
// through one.
func TestFleetZipfLikeOneReplica(t *testing.T) {
	r := redistest.Start(t)
	one := newEdge(t)
	fleet := fleetOf(t, 3, r.Addr())
	paths := zipfPaths(one.sim, 600)
	for _, p := range paths {
		one.get(p)
	}
	for i, p := range paths {
		fleet[i%3].get(p)
	}
	alone, shared := one.sim.Stats().Requests, fleet[0].sim.Stats().Requests
	if float64(shared) > 1.1*float64(alone) {
		t.Errorf("3 replicas made %d legacy calls, one replica %d: more than 1.1x", shared, alone)
	}
	t.Logf("legacy calls: one replica %d, three replicas %d", alone, shared)
}

// zipfPaths draws n requests over the transactions and wallets of sim,
// a few popular and a long tail.
func zipfPaths(sim *legacysim.Sim, n int) []string {
	var pages []string
	for _, tx := range sim.TradeTxs() {
		pages = append(pages, "/v1/tx/"+tx)
	}
	for _, w := range sim.Wallets() {
		pages = append(pages, "/v1/trader/"+w+"/positions/closed")
	}
	z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.2, 1, uint64(len(pages)-1))
	out := make([]string, n)
	for i := range out {
		out[i] = pages[z.Uint64()]
	}
	return out
}

// Redis killed mid-load and started again: no client sees an error, the
// fleet's Redis breaker opens and closes, and the shared tier serves again.
func TestFleetSurvivesRedisLoss(t *testing.T) {
	r := redistest.Start(t)
	fleet := fleetOf(t, 2, r.Addr(), withAdmin)
	sim := fleet[0].sim
	var (
		stop   = make(chan struct{})
		wg     sync.WaitGroup
		mu     sync.Mutex
		counts = map[int]int{}
		sent   int
		paths  = zipfPaths(sim, 400)
	)
	for w := range 4 {
		wg.Go(func() {
			for i := w; ; i += 4 {
				select {
				case <-stop:
					return
				default:
				}
				resp, _ := fleet[i%2].get(paths[i%len(paths)])
				mu.Lock()
				counts[resp.StatusCode]++
				sent++
				mu.Unlock()
			}
		})
	}
	testkit.Eventually(t, "load before the kill", func() bool { mu.Lock(); defer mu.Unlock(); return sent > 100 })
	r.Stop() // SIGKILL
	testkit.Eventually(t, "the Redis breaker to open", func() bool {
		return metricValue(scrape(t, fleet[0]), `tradergate_redis_breaker_state`) == "2"
	})
	testkit.Eventually(t, "load while Redis is down", func() bool { mu.Lock(); defer mu.Unlock(); return sent > 300 })
	r.Restart()
	testkit.Eventually(t, "the Redis breaker to close", func() bool {
		return metricValue(scrape(t, fleet[0]), `tradergate_redis_breaker_state`) == "0"
	})
	close(stop)
	wg.Wait()
	mu.Lock()
	if counts[200] != sent {
		t.Errorf("%d requests, statuses %v: every one must be a 200", sent, counts)
	}
	mu.Unlock()

	// The shared tier serves again: a page replica 1 fetches now is a
	// shared-tier hit on replica 2.
	tx := "/v1/tx/" + sim.TradeTxs()[5]
	testkit.Eventually(t, "the shared tier to serve again", func() bool {
		fleet[0].get(tx)
		resp, _ := fleet[1].get(tx)
		return strings.HasPrefix(resp.Header.Get("Cache-Status"), "tradergate-l2; hit") ||
			strings.HasPrefix(resp.Header.Get("Cache-Status"), "tradergate; hit")
	})
}

func scrape(t *testing.T, e *edge) string {
	t.Helper()
	testkit.Eventually(t, "the admin listener", func() bool { return e.srv.AdminAddr() != "" })
	_, body := getText(t, "http://"+e.srv.AdminAddr()+"/metrics")
	return body
}

// A value in the shared tier that does not decode is a miss and a count,
// never an error to the client.
func TestFleetCorruptSharedValue(t *testing.T) {
	r := redistest.Start(t)
	fleet := fleetOf(t, 2, r.Addr(), withAdmin)
	tx := "/v1/tx/" + fleet[0].sim.TradeTxs()[3]
	fleet[0].get(tx)
	rc := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer rc.Close()
	ctx := context.Background()
	keys, err := rc.Keys(ctx, "tradergate:page:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("no shared page: %v", err)
	}
	for _, k := range keys {
		if strings.HasSuffix(k, "v") {
			rc.Set(ctx, k, "not a page", time.Minute)
		}
	}
	resp, body := fleet[1].get(tx)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"status_code":"1"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if got := metricValue(scrape(t, fleet[1]), `tradergate_l2_requests_total{result="corrupt"}`); got != "1" {
		t.Errorf("corrupt values counted: %q, want 1", got)
	}
}
