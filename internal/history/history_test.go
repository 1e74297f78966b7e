package history

import (
	"context"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"tradergate/internal/testkit"
	"tradergate/legacysim"
)

// quietRedis drops go-redis's process-wide dial-failure lines: the run
// cuts Redis off on purpose.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{})
	goleak.VerifyTestMain(m, append(testkit.ToxiproxyGoroutines, testkit.FasthttpGoroutines...)...)
}

var phaseFlag = flag.Duration("history.phase", 5*time.Second,
	"how long each phase of TestHistory runs: 5s in CI (about a minute in all); longer for a longer run")

// workload is what the clients ask for: targets by popularity (a Zipf
// draw over them), first pages that clients follow by cursor, and order
// books at settled times.
type workload struct {
	popular []string
	chains  []string
	books   []string
}

func newWorkload(sim *legacysim.Sim, end time.Time) *workload {
	w := &workload{}
	settledS := strconv.FormatInt(end.Add(-time.Hour).Unix(), 10)
	settledMs := strconv.FormatInt(end.Add(-30*time.Minute).UnixMilli(), 10)
	recentMs := strconv.FormatInt(end.Add(-20*time.Minute).UnixMilli(), 10)
	for _, a := range sim.Wallets() {
		base := "/v1/trader/" + a
		w.popular = append(w.popular, base+"/activity", base+"/activity?limit=5", base+"/deposits-withdrawals",
			base+"/positions/open", base+"/positions/closed", base+"/combo-positions/closed",
			"/v1/trader/wallet-address/"+a, base+"/activity?toTimestamp="+settledS+"&limit=10",
			base+"/deposits-withdrawals?type=deposit&limit=5")
		w.chains = append(w.chains, base+"/activity?limit=7", base+"/deposits-withdrawals?limit=4")
	}
	for signer := range sim.Signers() {
		w.popular = append(w.popular, "/v1/trader/wallet-address/"+signer[:2]+strings.ToUpper(signer[2:8])+signer[8:])
	}
	txs := sim.TradeTxs()
	for i := 0; i < len(txs); i += 17 {
		w.popular = append(w.popular, "/v1/tx/"+txs[i])
	}
	for _, tx := range sim.ComboTxs() {
		w.popular = append(w.popular, "/v1/tx/"+tx)
	}
	w.popular = append(w.popular, "/v1/tx/0x"+strings.Repeat("ab", 32)) // never indexed: data null
	ev := "/v1/orderbook/events?"
	for mi, m := range sim.Markets() {
		w.popular = append(w.popular, ev+"marketId="+m.ID+"&order=desc&limit=40")
		w.chains = append(w.chains, ev+"marketId="+m.ID+"&order=desc&limit=25")
		for k, tok := range m.Tokens {
			w.popular = append(w.popular, ev+"tokenId="+tok+"&order=desc&limit=20",
				ev+"tokenId="+tok+"&eventType=book&order=desc&limit=2",
				ev+"tokenId="+tok+"&to="+settledMs+"&order=desc&limit=30")
			w.chains = append(w.chains, ev+"tokenId="+tok+"&from="+recentMs+"&order=asc&limit=60")
			for j := range 3 {
				// Settled times of the generated data, from 3 hours to 15
				// minutes before it ends.
				at := end.Add(-3*time.Hour + time.Duration((mi*47+k*13+j*61)%165)*time.Minute + 777*time.Millisecond).UnixMilli()
				w.books = append(w.books, "/v1/orderbook/book?tokenId="+tok+"&at="+strconv.FormatInt(at, 10)+"&depth=5")
			}
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	r.Shuffle(len(w.popular), func(i, j int) { w.popular[i], w.popular[j] = w.popular[j], w.popular[i] })
	return w
}

// client sends requests until stop is closed: a Zipf draw over the
// popular targets, now and then a cursor chain or a book at T; GET or
// HEAD, identity or gzip, with If-None-Match of an ETag it holds, to a
// replica and front drawn each time.
func (f *fleet) client(id int, w *workload, stop <-chan struct{}) {
	r := rand.New(rand.NewPCG(uint64(id), 99))
	zipf := rand.NewZipf(r, 1.1, 1, uint64(len(w.popular)-1))
	etags := map[string]string{}
	do := func(rep int, front Front, target, method string, inm bool) Exchange {
		rq := Request{Replica: rep, Front: front, Method: method, Target: target, Gzip: r.IntN(2) == 0, Key: clientKey}
		if inm {
			rq.IfNoneMatch = etags[target]
		}
		// Every answer comes within upstream.timeout and its retry, or
		// the replica is gone; 20s only keeps a broken edge from hanging
		// the test.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		e := f.rec.Do(ctx, f.transport[rep][front], f.reps[rep].base(), rq)
		if e.Status == 200 && e.ETag != "" {
			etags[target] = e.ETag
		}
		if e.Status == 0 {
			time.Sleep(20 * time.Millisecond) // a replica down: do not spin
		}
		return e
	}
	for {
		select {
		case <-stop:
			return
		default:
		}
		rep := r.IntN(replicas)
		front := H1
		if rep > 0 {
			front = H1TLS
			if r.IntN(5) < 3 {
				front = H2
			}
		}
		switch x := r.IntN(100); {
		case x < 5:
			target := w.chains[r.IntN(len(w.chains))]
			for range 1 + r.IntN(5) {
				e := do(rep, front, target, "GET", false)
				next := nextCursor(e)
				if next == "" {
					break
				}
				target = withCursor(target, next)
			}
		case x < 7:
			do(rep, front, w.books[r.IntN(len(w.books))], "GET", false)
		default:
			target := w.popular[zipf.Uint64()]
			method := "GET"
			if r.IntN(100) < 6 {
				method = "HEAD"
			}
			do(rep, front, target, method, r.IntN(100) < 15)
		}
	}
}

// nextCursor is data.nextCursor of a 200 page, or "".
func nextCursor(e Exchange) string {
	if e.Status != 200 || e.Body == "" {
		return ""
	}
	var page struct {
		Data struct {
			NextCursor *string `json:"nextCursor"`
		} `json:"data"`
	}
	if json.Unmarshal([]byte(e.Body), &page) != nil || page.Data.NextCursor == nil {
		return ""
	}
	return *page.Data.NextCursor
}

func withCursor(target, cursor string) string {
	path, q, _ := strings.Cut(target, "?")
	var kept []string
	for p := range strings.SplitSeq(q, "&") {
		if !strings.HasPrefix(p, "cursor=") && p != "" {
			kept = append(kept, p)
		}
	}
	kept = append(kept, "cursor="+url.QueryEscape(cursor))
	return path + "?" + strings.Join(kept, "&")
}

// phase is one stretch of the run and the fault it injects.
type phase struct {
	name string
	run  func(d time.Duration)
}

func (f *fleet) phases() []phase {
	sleep := time.Sleep
	legacy := func(kind Kind, faults legacysim.Faults) func(time.Duration) {
		return func(d time.Duration) {
			end := f.timeline.Begin(kind, -1)
			f.sim.SetFaults(faults)
			sleep(d)
			f.sim.SetFaults(legacysim.Faults{})
			end()
		}
	}
	cutRedis := func(d time.Duration) {
		end := f.timeline.Begin(RedisCut, -1)
		f.redisX.Stop()
		sleep(d)
		if err := f.redisX.Start(); err != nil {
			f.t.Fatal(err)
		}
		end()
	}
	return []phase{
		{"calm", sleep},
		{"legacy host slow (" + runTiming().slow.String() + " a call)", legacy(LegacySlow, legacysim.Faults{Latency: runTiming().slow})},
		{"legacy host 5xx (half the calls)", legacy(Legacy5xx, legacysim.Faults{FailStatus: 503, FailRate: 0.5})},
		{"legacy host cuts bodies", legacy(LegacyCut, legacysim.Faults{Truncate: true})},
		{"legacy host hanging (orderbook_events)", legacy(LegacyHang, legacysim.Faults{Route: "orderbook_events", Hang: true})},
		{"Redis restarted empty", func(d time.Duration) {
			end := f.timeline.Begin(RedisRestart, -1)
			f.redis.Restart()
			end()
			sleep(d)
		}},
		{"Redis cut off", cutRedis},
		{"replica 2 killed and restarted", func(d time.Duration) {
			f.restart(f.reps[2], d/2)
			sleep(d / 2)
		}},
		{"reload: fresh_ttl 3s on activity, orderbook_events", func(d time.Duration) {
			end := f.timeline.Begin(Reload, -1)
			f.reload()
			end()
			sleep(d)
		}},
		{"replica 1 on_store_error: deny, Redis cut off", func(d time.Duration) {
			// Denying, a replica answers 503 whenever its store fails,
			// a call slower than redis.timeout included: the fault lasts
			// as long as the mode.
			end := f.timeline.Begin(LimiterDeny, 1)
			f.setDeny(1, true)
			f.restart(f.reps[1], 50*time.Millisecond)
			sleep(d / 4)
			cutRedis(d / 2)
			sleep(d / 4)
			f.setDeny(1, false)
			f.restart(f.reps[1], 50*time.Millisecond)
			end()
		}},
		{"calm", sleep},
	}
}

// The edge's promise, held over a whole history of three replicas under
// faults (doc.go): every answer of a bounded run is checked, and none may
// break it.
func TestHistory(t *testing.T) {
	f := newFleet(t)
	d := *phaseFlag
	res := f.run(f.phases(), d, minAnswers(d))
	for i, v := range res.Violations {
		if i == 20 {
			t.Errorf("... and %d more violations", len(res.Violations)-20)
			break
		}
		t.Error(v.String())
	}
	if res.Checked < minAnswers(d) {
		t.Errorf("%d answers checked, want at least %d", res.Checked, minAnswers(d))
	}
	coverage(t, f.rec.Exchanges())
	streamCoverage(t, f.subs)
}

// streamCoverage fails the run unless its streams were resumed: on an
// order book stream and on a trader's, a connection that sent
// Last-Event-ID got events, and some stream was ended by a replica going
// down.
func streamCoverage(t *testing.T, subs []Subscription) {
	t.Helper()
	resumed := map[string]bool{}
	shutdown := false
	for i := range subs {
		s := &subs[i]
		for _, e := range s.Events {
			if s.Conns[e.Conn].LastEventID != "" {
				resumed[s.Route] = true
			}
		}
		for _, c := range s.Conns {
			shutdown = shutdown || c.End == "shutting_down" || c.Err != ""
		}
	}
	for _, r := range []string{"orderbook_events", "activity"} {
		if !resumed[r] {
			t.Errorf("no %s stream was resumed with Last-Event-ID and got events after", r)
		}
	}
	if !shutdown {
		t.Error("no stream was ended by a replica going down")
	}
}

// run has the clients send requests through the phases, each d long, and
// checks the history. The last phase goes on, up to 3 minutes more, until
// the history holds at least answers: a machine busy with other work
// slows the clients, and the promise is checked over that many answers
// all the same.
func (f *fleet) run(phases []phase, d time.Duration, answers int) *Result {
	w := newWorkload(f.sim, time.Now().Truncate(time.Second))
	f.t.Logf("workload: %d requests by popularity, %d first pages of cursor chains, %d books at T",
		len(w.popular), len(w.chains), len(w.books))
	names := make([]string, len(phases))
	for i, p := range phases {
		names[i] = p.name
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for id := range clients {
		wg.Go(func() { f.client(id, w, stop) })
	}
	subscribers := f.startSubscribers(stop)
	start := time.Now()
	for i, p := range phases {
		f.rec.SetPhase(i)
		p.run(d)
	}
	for deadline := time.Now().Add(3 * time.Minute); f.rec.Len() < answers && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	f.subs = subscribers()
	for i := range f.subs {
		f.t.Logf("subscriber %q: %s", f.subs[i].Name, f.subs[i].Connections())
	}
	took := time.Since(start)
	checking := time.Now()
	c := f.checker(names)
	res := c.Check(f.rec.Exchanges())
	res.Streams = c.CheckStreams(f.subs)
	res.Violations = append(res.Violations, res.Streams.Violations...)
	f.t.Logf("history of %v over %d replicas, checked in %v:\n%s", took.Round(time.Second), replicas,
		time.Since(checking).Round(time.Millisecond), res.Report())
	return res
}

// coverage fails the run unless the history holds each kind of exchange
// the promise speaks of: it is no proof of what it never saw.
func coverage(t *testing.T, exs []Exchange) {
	t.Helper()
	seen := map[string]int{}
	for i := range exs {
		e := &exs[i]
		seen[string(e.Front)]++
		seen[e.Method]++
		seen["status "+strconv.Itoa(e.Status)]++
		if e.Gzip && e.ContentEncoding == "gzip" {
			seen["gzip"]++
		}
		if e.XCache == "STALE" {
			seen["stale"]++
		}
		if strings.Contains(e.Target, "cursor=") && e.Status == 200 {
			seen["cursor page"]++
		}
		if strings.HasPrefix(e.Target, "/v1/orderbook/book") && e.Status == 200 {
			seen["book at T"]++
		}
		if strings.Contains(e.CacheControl, "immutable") {
			seen["immutable"]++
		}
	}
	for _, k := range []string{string(H1), string(H1TLS), string(H2), "HEAD", "status 304", "gzip", "stale",
		"cursor page", "book at T", "immutable", "status 502", "status 503", "status 0"} {
		if seen[k] == 0 {
			t.Errorf("the history holds no %s", k)
		}
	}
	t.Logf("coverage: %v", seen)
}

// clients is how many clients send requests at once.
const clients = 24

// minAnswers is the least a run of phases of d must check: 100,000 in
// the CI run, but a sixth of it under the race detector, which slows the
// three edges, the legacy host and the clients on the same two CPUs about
// six times (CI runs the suite once with it and once without, under
// -tags poison).
func minAnswers(d time.Duration) int {
	n := int(100_000 * d / (5 * time.Second))
	if raceEnabled {
		n /= 6
	}
	return n
}
