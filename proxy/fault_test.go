package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"tradergate/internal/testkit"
	"tradergate/legacysim"
	"tradergate/proxy/config"
	"tradergate/proxy/route"
	"tradergate/proxy/upstream"
)

// The fault suite: each case asserts what clients receive, what
// reached the legacy host (legacysim's counts), and, through TestMain's
// goleak, that no goroutine is left behind.

// noteFaults logs what a case sent and how many of its answers were
// failures in the variant A envelope (docs/CONTRACT.md "Errors"), the
// figures of the suite's closing note; go test -v -run TestFault lists
// them case by case.
func noteFaults(t *testing.T, requests, failures int) {
	t.Helper()
	t.Logf("fault case: %d client requests, %d failures answered as variant A errors", requests, failures)
}

// activity is the first activity page of wallet i: a fresh page.
func activity(e *edge, i int) string {
	return "/v1/trader/" + e.sim.Wallets()[i%len(e.sim.Wallets())] + "/activity?limit=" + strconv.Itoa(1+i/len(e.sim.Wallets()))
}

func TestFaultLegacyDown(t *testing.T) {
	e := newEdge(t)
	e.up.Close() // connection refused from now on
	resp, body := e.get(activity(e, 0))
	failure(t, resp, body, 502, "Upstream unreachable")
	// Connection errors are retried: max_attempts 3 means two retries.
	if retried, _ := e.srv.RetryStats(); retried != 2 {
		t.Errorf("retried %d times, want 2", retried)
	}
	noteFaults(t, 1, 1)
}

func TestFaultLegacyHangsAndIsSlow(t *testing.T) {
	short := withConfig(func(c *config.Config) { c.Upstream.Timeout = 300 * time.Millisecond })
	for _, f := range []legacysim.Faults{{Hang: true}, {Latency: 3 * time.Second}} {
		e := newEdge(t, short)
		e.sim.SetFaults(f)
		start := time.Now()
		resp, body := e.get(activity(e, 0))
		failure(t, resp, body, 504, "Upstream timeout")
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%+v: answered after %v, deadline 300ms", f, took)
		}
		// A timeout has used the deadline: it is not retried.
		if n := e.sim.Stats().Requests; n != 1 {
			t.Errorf("%+v: legacy host saw %d calls, want 1", f, n)
		}
		testkit.Eventually(t, "the hung call to end", func() bool { return e.sim.Stats().InFlight == 0 })
		noteFaults(t, 1, 1)
	}
}

func TestFaultRetriesAndBudget(t *testing.T) {
	t.Run("503 retried with its Retry-After", func(t *testing.T) {
		e := newEdge(t)
		e.sim.SetFaults(legacysim.Faults{FailStatus: 503, RetryAfter: 0})
		resp, body := e.get(activity(e, 0))
		failure(t, resp, body, 502, "Upstream error")
		if n := e.sim.Stats().Requests; n != 3 {
			t.Errorf("legacy host saw %d calls, want 3 (two retries)", n)
		}
		noteFaults(t, 1, 1)
	})
	t.Run("a Retry-After longer than max_backoff is not waited for", func(t *testing.T) {
		e := newEdge(t)
		e.sim.SetFaults(legacysim.Faults{FailStatus: 503, RetryAfter: 30})
		start := time.Now()
		e.get(activity(e, 0))
		if n := e.sim.Stats().Requests; n != 1 || time.Since(start) > 2*time.Second {
			t.Errorf("legacy host saw %d calls in %v, want 1 at once", n, time.Since(start))
		}
		noteFaults(t, 1, 1)
	})
	t.Run("500 and malformed bodies are answers, not retried", func(t *testing.T) {
		for _, f := range []legacysim.Faults{{FailStatus: 500}, {Malformed: true}, {PadBytes: 64 << 10}} {
			e := newEdge(t, withConfig(func(c *config.Config) { c.Upstream.MaxBodyBytes = 32 << 10 }))
			e.sim.SetFaults(f)
			resp, _ := e.get(activity(e, 0))
			if resp.StatusCode != 502 || e.sim.Stats().Requests != 1 {
				t.Errorf("%+v: %d after %d calls", f, resp.StatusCode, e.sim.Stats().Requests)
			}
			noteFaults(t, 1, 1)
		}
	})
	t.Run("truncated body is a broken connection, retried", func(t *testing.T) {
		e := newEdge(t)
		e.sim.SetFaults(legacysim.Faults{Truncate: true})
		resp, body := e.get(activity(e, 0))
		failure(t, resp, body, 502, "Upstream error")
		if n := e.sim.Stats().Requests; n != 3 {
			t.Errorf("legacy host saw %d calls, want 3", n)
		}
		noteFaults(t, 1, 1)
	})
	t.Run("the budget caps retries in an outage", func(t *testing.T) {
		e := newEdge(t, withConfig(func(c *config.Config) {
			c.Upstream.Retry.BudgetRatio = 0.1
			c.Upstream.Retry.BudgetReserve = 5
			c.Upstream.Breaker.MinRequests = 1000 // keep the breaker out of it
		}))
		e.sim.SetFaults(legacysim.Faults{FailStatus: 502})
		const n = 100
		for i := range n {
			e.get(activity(e, i))
		}
		calls := e.sim.Stats().Requests
		retried, refused := e.srv.RetryStats()
		// 100 first attempts, plus at most the reserve and 10% of calls.
		if calls < n || calls > n+5+n/10+1 || refused == 0 || int64(retried) != calls-n {
			t.Errorf("%d client requests made %d legacy calls (%d retries, %d refused)", n, calls, retried, refused)
		}
		noteFaults(t, n, n)
	})
}

func TestFault5xxStormOpensTheBreaker(t *testing.T) {
	edgeClock := testkit.NewClock(time.Now())
	e := newEdge(t, withClock(edgeClock.Now), withConfig(func(c *config.Config) {
		c.Upstream.Retry.MaxAttempts = 1
		// The two warm-up calls count too: 2 good + 4 failed = 6 calls,
		// 4/6 >= 0.6 trips on the fourth failure and not before.
		c.Upstream.Breaker = upstream.BreakerConfig{MinRequests: 6, FailureRatio: 0.6, Interval: 10 * time.Second,
			OpenTimeout: 300 * time.Millisecond, HalfOpenProbes: 1}
	}))
	held := []string{activity(e, 0), activity(e, 1)}
	for _, p := range held {
		if resp, _ := e.get(p); resp.StatusCode != 200 {
			t.Fatalf("warm-up %s: %d", p, resp.StatusCode)
		}
	}
	edgeClock.Advance(time.Minute) // the held pages are now only good for stale_if_error
	e.sim.ResetStats()
	e.sim.SetFaults(legacysim.Faults{FailStatus: 500, Route: "activity"})

	// The storm: four failures trip the breaker.
	for i := range 4 {
		resp, body := e.get(activity(e, 10+i))
		failure(t, resp, body, 502, "Upstream error")
	}
	if st := e.srv.BreakerState(route.Activity); st != "open" {
		t.Fatalf("breaker %s after the storm", st)
	}
	if n := e.sim.Stats().Requests; n != 4 {
		t.Errorf("legacy host saw %d calls, want 4", n)
	}
	// While open: nothing reaches the legacy host; held pages are served
	// stale, others get 503 with the time left before the probes.
	for i := range 20 {
		resp, body := e.get(activity(e, 20+i))
		failure(t, resp, body, 503, "Upstream unavailable")
		if ra, _ := strconv.Atoi(resp.Header.Get("Retry-After")); ra < 1 || ra > 1 {
			t.Errorf("Retry-After %q while open (open_timeout 300ms)", resp.Header.Get("Retry-After"))
		}
	}
	for _, p := range held {
		if resp, _ := e.get(p); resp.StatusCode != 200 || resp.Header.Get("X-Cache") != "STALE" {
			t.Errorf("held page while open: %d %s", resp.StatusCode, resp.Header.Get("X-Cache"))
		}
	}
	// Another route has its own breaker, closed.
	if resp, _ := e.get("/v1/trader/wallet-address/" + e.sim.Wallets()[0]); resp.StatusCode != 200 {
		t.Errorf("another route while activity's breaker is open: %d", resp.StatusCode)
	}
	if n := e.sim.Stats().ByRoute["activity"]; n != 4 {
		t.Errorf("legacy host saw %d activity calls while open, want still 4", n)
	}

	// Half-open, still failing: one probe, open again. The breaker keeps
	// the wall clock: wait for its open_timeout to pass.
	halfOpen := func() bool { return e.srv.BreakerState(route.Activity) == "half-open" }
	testkit.Eventually(t, "the breaker half-open", halfOpen)
	e.get(activity(e, 50))
	if n := e.sim.Stats().ByRoute["activity"]; n != 5 {
		t.Errorf("after one probe: %d activity calls, want 5", n)
	}
	if st := e.srv.BreakerState(route.Activity); st != "open" {
		t.Errorf("breaker %s after a failed probe", st)
	}

	// The host recovers: the next probe closes the breaker.
	e.sim.SetFaults(legacysim.Faults{})
	testkit.Eventually(t, "the breaker half-open again", halfOpen)
	if resp, _ := e.get(activity(e, 51)); resp.StatusCode != 200 {
		t.Errorf("probe after recovery: %d", resp.StatusCode)
	}
	if st := e.srv.BreakerState(route.Activity); st != "closed" {
		t.Errorf("breaker %s after a good probe", st)
	}
	for i := range 5 {
		if resp, _ := e.get(activity(e, 60+i)); resp.StatusCode != 200 {
			t.Errorf("after recovery: %d", resp.StatusCode)
		}
	}
	noteFaults(t, 4+20+2+1+1+1+1+5, 4+20+1)
}

func TestFault429StormHoldsBack(t *testing.T) {
	e := newEdge(t)
	w := e.sim.Wallets()
	held := "/v1/trader/" + w[0] + "/deposits-withdrawals"
	e.get(held)
	e.sim.ResetStats()
	e.sim.SetFaults(legacysim.Faults{FailStatus: 429, RetryAfter: 1})

	resp, body := e.get(activity(e, 0))
	failure(t, resp, body, 503, "Upstream rate limited")
	if resp.Header.Get("Retry-After") != "1" {
		t.Errorf("Retry-After %q, want the legacy host's 1", resp.Header.Get("Retry-After"))
	}
	// While the legacy host's Retry-After lasts nothing is sent to it.
	for i := range 10 {
		resp, body := e.get(activity(e, 1+i))
		failure(t, resp, body, 503, "Upstream rate limited")
	}
	if n := e.sim.Stats().Requests; n != 1 {
		t.Errorf("legacy host saw %d calls during its Retry-After, want 1", n)
	}
	// The 429s did not count against the breaker.
	if st := e.srv.BreakerState(route.Activity); st != "closed" {
		t.Errorf("breaker %s after 429s", st)
	}
	e.sim.SetFaults(legacysim.Faults{})
	testkit.Eventually(t, "the hold to pass", func() bool {
		resp, _ := e.get(activity(e, 20))
		return resp.StatusCode == 200
	})
	noteFaults(t, 12, 11)
}

// serveEdge is the edge's listener and how to stop it: every test edge
// runs through Server.Serve, as main runs it.
func serveEdge(t *testing.T, e *edge) (addr string, stop context.CancelFunc, wait func() error) {
	t.Helper()
	return e.addr, e.stop, e.wait
}

func TestFaultSlowClient(t *testing.T) {
	e := newEdge(t, withConfig(func(c *config.Config) { c.Server.ReadHeaderTimeout = 200 * time.Millisecond }))
	addr, _, _ := serveEdge(t, e)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Slowloris: a request line and one header, then nothing.
	fmt.Fprintf(conn, "GET /v1/tx/%s HTTP/1.1\r\nHost: x\r\n", e.sim.TradeTxs()[0])
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.Copy(io.Discard, conn) // returns when the server closes
	if err != nil || time.Since(start) > 3*time.Second {
		t.Errorf("slow client held the connection %v (%v)", time.Since(start), err)
	}
	// The edge still serves everyone else.
	resp, err := http.Get("http://" + addr + "/v1/nothing")
	if err != nil || resp.StatusCode != 401 {
		t.Errorf("after a slow client: %v %v", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
	noteFaults(t, 2, 1)
}

func TestFaultClientGoesMidResponse(t *testing.T) {
	e := newEdge(t)
	addr, _, _ := serveEdge(t, e)
	token := e.sim.Markets()[0].Tokens[0]
	path := "/v1/orderbook/events?tokenId=" + token + "&limit=10000"
	for range 5 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", path, keyAll)
		br := bufio.NewReader(conn)
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
			t.Fatalf("status line %q %v", line, err)
		}
		if _, err := io.CopyN(io.Discard, br, 4096); err != nil {
			t.Fatal(err)
		}
		conn.Close() // gone with most of the body unread
	}
	resp, body := e.get(path)
	if resp.StatusCode != 200 || len(body) < 100000 {
		t.Errorf("after clients left mid-body: %d, %d bytes", resp.StatusCode, len(body))
	}
	noteFaults(t, 6, 0)
}

func TestFaultRequestLimits(t *testing.T) {
	e := newEdge(t)
	tx := "/v1/tx/" + e.sim.TradeTxs()[0]
	resp, body := e.get(tx + "?pad=" + strings.Repeat("a", 9000))
	failure(t, resp, body, 414, "URI too long")

	req, _ := http.NewRequest(http.MethodGet, e.front.URL+tx, strings.NewReader("a body"))
	req.Header.Set("Authorization", "Bearer "+keyAll)
	r2, err := e.front.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	failure(t, r2, b2, 400, "Request body not allowed")
	if n := e.sim.Stats().Requests; n != 0 {
		t.Errorf("%d refused requests reached the legacy host", n)
	}
	noteFaults(t, 2, 2)
}

func TestFaultShutdownUnderLoad(t *testing.T) {
	e := newEdge(t)
	e.sim.SetFaults(legacysim.Faults{Latency: time.Second})
	addr, stop, wait := serveEdge(t, e)
	client := &http.Client{Timeout: 10 * time.Second}
	const n = 30
	var wg sync.WaitGroup
	statuses := make([]int, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+activity(e, i), nil)
			req.Header.Set("Authorization", "Bearer "+keyAll)
			resp, err := client.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	// Every request is accepted and waiting on the legacy host when the
	// signal comes.
	testkit.Eventually(t, "the requests to reach the legacy host", func() bool { return e.sim.Stats().InFlight == n })
	stop() // SIGTERM
	wg.Wait()
	if err := wait(); err != nil {
		t.Errorf("Serve: %v", err)
	}
	// Every request accepted before the signal completed.
	lost := 0
	for i := range n {
		if errs[i] != nil || statuses[i] != 200 {
			lost++
			t.Errorf("request %d: %d %v", i, statuses[i], errs[i])
		}
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Error("still accepting connections after shutdown")
	}
	if lost != 0 {
		t.Errorf("%d of %d requests accepted before the signal were lost", lost, n)
	}
	noteFaults(t, n, 0)
}

func TestFaultShutdownDeadline(t *testing.T) {
	e := newEdge(t, withConfig(func(c *config.Config) { c.Server.ShutdownTimeout = 500 * time.Millisecond }))
	e.sim.SetFaults(legacysim.Faults{Hang: true})
	addr, stop, wait := serveEdge(t, e)
	const n = 5
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bodies []string
	// Two requests a page: the second joins the flight its leader runs on
	// its own goroutine (cache.Options.Inline), which ends with the
	// leader's request at the deadline.
	for i := range 2 * n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+activity(e, i%n), nil)
			req.Header.Set("Authorization", "Bearer "+keyAll)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			bodies = append(bodies, strconv.Itoa(resp.StatusCode)+" "+resp.Header.Get("Retry-After")+" "+string(b))
			mu.Unlock()
		})
	}
	testkit.Eventually(t, "the requests to hang at the legacy host", func() bool { return e.sim.Stats().InFlight == n })
	testkit.Eventually(t, "every request to wait on its page's flight", func() bool { return e.srv.CacheStats().Waiting == 2*n })
	start := time.Now()
	stop()
	wg.Wait()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("drain took %v with shutdown_timeout 500ms", took)
	}
	want := `503 1 {"message":"Server shutting down","status_code":"0","data":null}`
	for _, b := range bodies {
		if b != want {
			t.Errorf("past the drain deadline: %s, want %s", b, want)
		}
	}
	if len(bodies) != 2*n {
		t.Errorf("%d of %d requests got an answer", len(bodies), 2*n)
	}
	_ = wait()
	_ = e.srv.Close() // ends the hung legacy calls
	noteFaults(t, n, n)
}
