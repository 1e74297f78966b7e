package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"tradergate/internal/testkit"
	"tradergate/internal/testkit/redistest"
)

// direct is a plain client of one server, bypassing the Conn, to check
// where keys landed.
func direct(t *testing.T, addr, password string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes and reads back one key through the Conn.
func roundTrip(t *testing.T, c *Conn, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	if err := c.Client().Set(ctx, key, "v-"+key, time.Minute).Err(); err != nil {
		t.Fatalf("SET %s: %v", key, err)
	}
	if got, err := c.Client().Get(ctx, key).Result(); err != nil || got != "v-"+key {
		t.Fatalf("GET %s = %q, %v", key, got, err)
	}
}

func TestOpenSingle(t *testing.T) {
	srv := redistest.Start(t)
	c := openOn(t, srv)
	roundTrip(t, c, c.Key("single"))
	if v, err := direct(t, srv.Addr(), "").Get(bg, "tradergate:single").Result(); err != nil || v != "v-tradergate:single" {
		t.Fatalf("key not in the server under the prefix: %q, %v", v, err)
	}
	if _, ok := c.Client().(*redis.Client); !ok {
		t.Errorf("one address gave a %T, want *redis.Client", c.Client())
	}
}

func TestOpenCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := open(t, Config{Addrs: cl.Addrs(), Timeout: 2 * time.Second}, nil, Options{})
	cc, ok := c.Client().(*redis.ClusterClient)
	if !ok {
		t.Fatalf("several addresses gave a %T, want *redis.ClusterClient", c.Client())
	}
	// Keys until every master owns one, each written and read back through
	// the Conn, then found on its owner by a plain client (which would get
	// MOVED from any other node).
	owners := map[string]string{} // node address -> a key it owns
	for i := 0; len(owners) < 3 && i < 1000; i++ {
		key := c.Key("k", fmt.Sprint(i))
		roundTrip(t, c, key)
		node, err := cc.MasterForKey(bg, key)
		if err != nil {
			t.Fatalf("MasterForKey: %v", err)
		}
		if _, seen := owners[node.Options().Addr]; !seen {
			owners[node.Options().Addr] = key
		}
	}
	if len(owners) != 3 {
		t.Fatalf("keys landed on %d masters, want 3: %v", len(owners), owners)
	}
	for _, addr := range cl.Addrs() {
		key, ok := owners[addr]
		if !ok {
			t.Fatalf("no key on %s: %v", addr, owners)
		}
		if v, err := direct(t, addr, "").Get(bg, key).Result(); err != nil || v != "v-"+key {
			t.Errorf("%s: GET %s = %q, %v", addr, key, v, err)
		}
	}
}

func TestOpenSentinel(t *testing.T) {
	s := redistest.StartSentinel(t)
	c := open(t, Config{Addrs: []string{s.Addr()}, MasterName: s.MasterName(), DB: 2, Timeout: 2 * time.Second}, nil, Options{})
	roundTrip(t, c, c.Key("sentinel"))
	m := redis.NewClient(&redis.Options{Addr: s.Master().Addr(), DB: 2})
	defer m.Close()
	if v, err := m.Get(bg, "tradergate:sentinel").Result(); err != nil || v != "v-tradergate:sentinel" {
		t.Fatalf("key not on the master's db 2: %q, %v", v, err)
	}
}

func TestPasswordFromEnv(t *testing.T) {
	const pw = "pw-5e7c19"
	srv := redistest.StartWith(t, redistest.Options{Password: pw})
	var logs testkit.LogBuffer
	cfg := Config{Addrs: []string{srv.Addr()}, PasswordEnv: "TG_REDIS_PW", Timeout: 2 * time.Second}
	c := open(t, cfg, env("TG_REDIS_PW", pw), Options{Logger: logs.Logger()})
	roundTrip(t, c, c.Key("auth"))

	// A wrong password: refused by Redis, and the text names neither.
	wrong := open(t, cfg, env("TG_REDIS_PW", "pw-wrong-88"), Options{Logger: logs.Logger()})
	var errs []string
	for range TripAfter + 2 {
		if err := wrong.Client().Set(bg, wrong.Key("auth"), "x", 0).Err(); err != nil {
			errs = append(errs, err.Error())
		} else {
			t.Fatal("a wrong password was accepted")
		}
	}
	all := strings.Join(errs, "\n") + logs.String()
	if strings.Contains(all, pw) || strings.Contains(all, "pw-wrong-88") {
		t.Fatalf("a password leaked:\n%s", all)
	}
	if !strings.Contains(errs[0], "WRONGPASS") {
		t.Errorf("first error %q, want Redis's WRONGPASS", errs[0])
	}
}

func TestBreakerKilledRedis(t *testing.T) {
	srv := redistest.Start(t)
	var logs testkit.LogBuffer
	c := open(t, Config{Addrs: []string{srv.Addr()}, Timeout: time.Second}, nil, Options{Logger: logs.Logger()})
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Collectors()...)
	rdb := c.Client()
	key := c.Key("breaker")
	roundTrip(t, c, key)

	srv.Stop() // SIGKILL

	for i := range TripAfter {
		err := rdb.Get(bg, key).Err()
		if err == nil || errors.Is(err, ErrUnavailable) {
			t.Fatalf("GET %d with Redis dead: %v, want go-redis's own error before the breaker trips", i, err)
		}
	}
	if c.State() != "open" {
		t.Fatalf("State() = %q after %d failures, want open", c.State(), TripAfter)
	}
	for i := range 50 {
		if err := rdb.Get(bg, key).Err(); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("GET %d with the breaker open: %v, want ErrUnavailable", i, err)
		}
	}
	pipe := rdb.Pipeline()
	get, set := pipe.Get(bg, key), pipe.Set(bg, key, "x", 0)
	if _, err := pipe.Exec(bg); !errors.Is(err, ErrUnavailable) || !errors.Is(get.Err(), ErrUnavailable) || !errors.Is(set.Err(), ErrUnavailable) {
		t.Fatalf("pipeline with the breaker open: %v, %v, %v", err, get.Err(), set.Err())
	}
	if got := value(t, c.stateGauge); got != 2 {
		t.Errorf("breaker state gauge %v, want 2 (open)", got)
	}

	// Down for several OpenFor periods: probes fail, the breaker cycles
	// open, half-open, open, and the log still has one line.
	testkit.Eventually(t, "two half-open probes", func() bool {
		_ = rdb.Get(bg, key).Err()
		return value(t, c.transitions.WithLabelValues("half-open")) >= 2
	})
	if n := value(t, c.transitions.WithLabelValues("half-open")); n < 1 {
		t.Errorf("no half-open probe in %v", 2*OpenFor)
	}

	srv.Restart()
	testkit.Eventually(t, "the breaker closes once Redis is back", func() bool {
		return rdb.Set(bg, key, "back", 0).Err() == nil
	})
	if c.State() != "closed" {
		t.Fatalf("State() = %q after recovery", c.State())
	}
	roundTrip(t, c, key)

	// The recovery line is logged by the Conn's goroutine; wait for it.
	testkit.Eventually(t, "the recovery is logged", func() bool { return logs.Count("redis reachable again") > 0 })
	if n, m := logs.Count("redis unreachable: each replica works alone"), logs.Count("redis reachable again"); n != 1 || m != 1 {
		t.Fatalf("%d unreachable and %d reachable lines, want 1 and 1:\n%s", n, m, logs.String())
	}
	if !strings.Contains(logs.String(), `"level":"WARN","msg":"redis unreachable`) {
		t.Errorf("unreachable is not a warning:\n%s", logs.String())
	}
	if got := value(t, c.stateGauge); got != 0 {
		t.Errorf("breaker state gauge %v, want 0 (closed)", got)
	}
	if n := value(t, c.errs); n < TripAfter+50+2 {
		t.Errorf("tradergate_redis_errors_total = %v, want at least %d", n, TripAfter+52)
	}
	if n := value(t, c.transitions.WithLabelValues("closed")); n != 1 {
		t.Errorf("transitions to closed = %v, want 1", n)
	}
	mfs, err := reg.Gather()
	series := map[string]int{}
	for _, mf := range mfs {
		series[mf.GetName()] = len(mf.GetMetric())
	}
	if err != nil || series["tradergate_redis_breaker_state"] != 1 || series["tradergate_redis_breaker_transitions_total"] != 3 ||
		series["tradergate_redis_errors_total"] != 1 {
		t.Errorf("registered series %v, %v", series, err)
	}
}

func TestBreakerHangingRedis(t *testing.T) {
	// Each call to a Redis that hangs costs the timeout; the timeouts count
	// once no call has succeeded for StallAfter (busy is not dead), and
	// then TripAfter of them open the breaker: calls are refused without
	// waiting.
	const timeout = 100 * time.Millisecond
	opened := time.Now()
	c := open(t, Config{Addrs: []string{redistest.Stalled(t)}, Timeout: timeout}, nil, Options{})
	calls := 0
	for ; c.State() != "open"; calls++ {
		if calls > int(StallAfter/timeout)+TripAfter+5 {
			t.Fatalf("breaker %s after %d timeouts", c.State(), calls)
		}
		ctx, cancel := context.WithTimeout(bg, timeout)
		err := c.Client().Get(ctx, "k").Err()
		cancel()
		if err == nil || errors.Is(err, ErrUnavailable) {
			t.Fatalf("GET %d: %v, want a timeout", calls, err)
		}
	}
	if took := time.Since(opened); took < StallAfter {
		t.Errorf("opened %v after start, before StallAfter (%v): timeouts counted while Redis could be busy", took, StallAfter)
	}
	start := time.Now()
	err := c.Client().Get(bg, "k").Err()
	if took := time.Since(start); !errors.Is(err, ErrUnavailable) || took >= timeout {
		t.Fatalf("with the breaker open: %v after %v; want ErrUnavailable without waiting %v", err, took, timeout)
	}
}

func TestBreakerIgnoresNilAndCallers(t *testing.T) {
	srv := redistest.Start(t)
	c := openOn(t, srv)
	for range 3 * TripAfter {
		if err := c.Client().Get(bg, c.Key("missing")).Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("GET of a missing key: %v", err)
		}
		// An error reply is Redis answering, too.
		if err := c.Client().Do(bg, "NOSUCHCOMMAND").Err(); err == nil {
			t.Fatal("unknown command accepted")
		}
	}
	srv.Stop()
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	for range 3 * TripAfter {
		if err := c.Client().Get(cancelled, "k").Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("GET with a cancelled context: %v", err)
		}
	}
	if c.State() != "closed" || value(t, c.errs) != 0 {
		t.Fatalf("State %q, errors %v: redis.Nil, error replies and callers' cancellations must not count",
			c.State(), value(t, c.errs))
	}
}

func TestBreakerCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := open(t, Config{Addrs: cl.Addrs(), Timeout: time.Second}, nil, Options{})
	roundTrip(t, c, c.Key("c"))
	cl.Stop()
	for range TripAfter {
		if err := c.Client().Get(bg, c.Key("c")).Err(); err == nil || errors.Is(err, ErrUnavailable) {
			t.Fatalf("GET with the cluster dead: %v", err)
		}
	}
	if err := c.Client().Get(bg, c.Key("c")).Err(); !errors.Is(err, ErrUnavailable) || c.State() != "open" {
		t.Fatalf("after %d failures: %v, state %s; want ErrUnavailable, open", TripAfter, err, c.State())
	}
}

func TestBreakerSentinel(t *testing.T) {
	s := redistest.StartSentinel(t)
	c := open(t, Config{Addrs: []string{s.Addr()}, MasterName: s.MasterName(), Timeout: time.Second}, nil, Options{})
	roundTrip(t, c, c.Key("s"))
	s.Master().Stop()
	for range TripAfter {
		if err := c.Client().Get(bg, c.Key("s")).Err(); err == nil || errors.Is(err, ErrUnavailable) {
			t.Fatalf("GET with the master dead: %v", err)
		}
	}
	if err := c.Client().Get(bg, c.Key("s")).Err(); !errors.Is(err, ErrUnavailable) || c.State() != "open" {
		t.Fatalf("after %d failures: %v, state %s; want ErrUnavailable, open", TripAfter, err, c.State())
	}
	s.Master().Restart()
	testkit.Eventually(t, "the breaker closes once the master is back", func() bool {
		return c.Client().Get(bg, c.Key("s")).Err() == redis.Nil
	})
}

func TestOpenWithRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	c := open(t, Config{Addrs: []string{srv.Addr()}}, nil, Options{})
	if err := c.Client().Ping(bg).Err(); err == nil {
		t.Fatal("PING answered with Redis down")
	}
	srv.Restart()
	testkit.Eventually(t, "the client connects once Redis is up", func() bool {
		return c.Client().Ping(bg).Err() == nil
	})
}

// Redis comes back when Redis comes back: after each outage, one long and
// then three short in a row, the client uses Redis again within a second
// of its accepting connections, however many dials failed meanwhile (the
// pool's own dial breaker never arms: deadconn.go).
func TestBreakerRecoversAfterOutages(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) (addrs []string, nodes []*redistest.Server)
	}{
		{"single", func(t *testing.T) ([]string, []*redistest.Server) {
			s := redistest.Start(t)
			return []string{s.Addr()}, []*redistest.Server{s}
		}},
		{"cluster", func(t *testing.T) ([]string, []*redistest.Server) {
			cl := redistest.StartCluster(t, 3)
			return cl.Addrs(), cl.Nodes()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addrs, nodes := tc.start(t)
			c := open(t, Config{Addrs: addrs}, nil, Options{})
			get := func() error {
				ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
				defer cancel()
				err := c.Client().Get(ctx, c.Key("back")).Err()
				if errors.Is(err, redis.Nil) {
					return nil
				}
				return err
			}
			testkit.Eventually(t, "redis in use", func() bool { return get() == nil })
			for i, down := range []time.Duration{1500 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond} {
				for _, n := range nodes {
					n.Stop()
				}
				// Traffic through the outage: the breaker opens, dials fail.
				for end := time.Now().Add(down); time.Now().Before(end); {
					if get() == nil {
						t.Fatalf("outage %d: a GET succeeded with redis stopped", i)
					}
					<-time.After(5 * time.Millisecond)
				}
				for _, n := range nodes {
					n.Restart()
				}
				if len(nodes) > 1 {
					// A Cluster serves once its nodes agree again, not when
					// they accept connections.
					testkit.Eventually(t, "cluster_state:ok", func() bool { return clusterOK(nodes) })
				}
				back := time.Now()
				for get() != nil {
					if took := time.Since(back); took > time.Second {
						t.Fatalf("outage %d (%v): redis not used %v after it accepted connections (breaker %s)", i, down, took, c.State())
					}
					<-time.After(5 * time.Millisecond)
				}
				t.Logf("outage %d (%v): in use again after %v", i, down, time.Since(back))
			}
		})
	}
}

// clusterOK asks every node, on a client of its own, whether the cluster
// serves.
func clusterOK(nodes []*redistest.Server) bool {
	for _, n := range nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr()})
		info, err := rc.ClusterInfo(bg).Result()
		_ = rc.Close()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			return false
		}
	}
	return true
}

// Busy is not dead: calls that run out of time while others succeed fail
// alone and leave the breaker closed.
func TestBreakerBusyIsNotDead(t *testing.T) {
	srv := redistest.Start(t)
	c := open(t, Config{Addrs: []string{srv.Addr()}}, nil, Options{})
	for i := range 4 * TripAfter {
		if i%4 == 0 {
			if err := c.Client().Get(bg, c.Key("busy")).Err(); !errors.Is(err, redis.Nil) {
				t.Fatalf("GET: %v", err)
			}
		}
		late, cancel := context.WithDeadline(bg, time.Now().Add(-time.Millisecond))
		err := c.Client().Get(late, c.Key("busy")).Err()
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("GET past its deadline: %v", err)
		}
	}
	if c.State() != "closed" {
		t.Fatalf("breaker %s after timeouts between successes", c.State())
	}
}
