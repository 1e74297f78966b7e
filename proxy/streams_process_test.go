//go:build unix

package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"tradergate/internal/testkit"
	"tradergate/internal/testkit/browsertest"
	"tradergate/internal/testkit/redistest"
	"tradergate/legacysim"
	"tradergate/proxy"
)

// Replicas that die: these tests run the edge as its own program, three
// of them over one Redis in front of one simulated host, and kill one
// with SIGKILL, as a crashed pod dies: no drain, no lease handed over.

// buildEdge builds the edge program into the test's folder (the build
// cache makes every build after the first a link).
func buildEdge(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tradergate")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "tradergate").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// replica is one edge program.
type replica struct {
	addr, admin string
	proc        testkit.Process
}

// procFleet is n edge programs over one Redis, in front of a live
// simulated host served by the test.
type procFleet struct {
	sim      *legacysim.Sim
	up       *httptest.Server
	replicas []*replica
}

func startProcFleet(t *testing.T, n int) *procFleet {
	t.Helper()
	bin := buildEdge(t)
	r := redistest.Start(t)
	simCfg := liveSim()
	simCfg.Key = legacyKey
	simCfg.Journal = true
	f := &procFleet{sim: legacysim.New(simCfg)}
	f.up = httptest.NewServer(f.sim)
	t.Cleanup(f.up.Close)
	dir := t.TempDir()
	for i := range n {
		p1, _ := testkit.FreePort()
		p2, _ := testkit.FreePort()
		rep := &replica{addr: "127.0.0.1:" + strconv.Itoa(p1), admin: "127.0.0.1:" + strconv.Itoa(p2)}
		cfg := fmt.Sprintf(`server:
  listen: %q
  shutdown_timeout: 2s
  max_connections_per_address: -1
admin:
  listen: %q
upstream:
  base_url: %q
  timeout: 5s
keys:
  - id: all
    sha256: %q
    plan: pro
    routes: ["*"]
plans:
  pro: {requests: 100000, window: 1m}
redis:
  addrs: [%q]
  timeout: 200ms
streams:
  lease: 1s
  retry: 500ms
log:
  level: warn
  access: false
`, rep.addr, rep.admin, f.up.URL+"/open-api", proxy.HashKey(keyAll), r.Addr())
		file := filepath.Join(dir, "replica"+strconv.Itoa(i)+".yaml")
		if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-config", file)
		cmd.Env = append(os.Environ(), "TRADERGATE_UPSTREAM_KEY="+legacyKey)
		err := rep.proc.Start(cmd, filepath.Join(dir, "replica"+strconv.Itoa(i)+".log"), 30*time.Second, func(ctx context.Context, pid int) bool {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+rep.admin+"/readyz", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rep.proc.Stop)
		f.replicas = append(f.replicas, rep)
	}
	return f
}

// metric reads one series of a replica's /metrics; -1 when the replica
// does not answer.
func (rep *replica) metric(series string) float64 {
	resp, err := http.Get("http://" + rep.admin + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	v, _ := strconv.ParseFloat(metricValue(string(b), series), 64)
	return v
}

const leadingSeries = `tradergate_stream_leading{route="orderbook_events"}`

// leader is the replica polling the order book stream, or nil.
func (f *procFleet) leader() *replica {
	for _, rep := range f.replicas {
		if rep.proc.Pid() != 0 && rep.metric(leadingSeries) == 1 {
			return rep
		}
	}
	return nil
}

// truth is the simulated host's own order of the events after cursor:
// the cursors of its ascending pages, asked of it directly.
func (f *procFleet) truth(t *testing.T, query, cursor string, n int) []string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.up.URL+"/open-api/v1/orderbook/events?"+query+"&order=asc&limit="+strconv.Itoa(n)+"&cursor="+url.QueryEscape(cursor), nil)
	req.Header.Set("Authorization", "Bearer "+legacyKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Data struct {
			Items []struct {
				Cursor string `json:"cursor"`
			} `json:"items"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, it := range page.Data.Items {
		ids = append(ids, it.Cursor)
	}
	return ids
}

// checkExactlyOnce holds ids to the host's order: each id the one after
// the last, from the first on.
func (f *procFleet) checkExactlyOnce(t *testing.T, query string, ids []string) {
	t.Helper()
	want := f.truth(t, query, ids[0], len(ids)-1)
	if len(want) != len(ids)-1 {
		t.Fatalf("the host has %d events after the first, the client %d", len(want), len(ids)-1)
	}
	for i, id := range ids[1:] {
		if id != want[i] {
			t.Fatalf("event %d: %s, the host's next is %s (ids %v)", i+1, id, want[i], ids)
		}
	}
}

// When the replica polling a stream dies, another takes its lease
// within the lease's time (1s, renewed every third of it), and its
// subscribers lose nothing: a subscriber on a surviving replica sees
// every event once, in order, across the takeover.
func TestStreamFleetTakeover(t *testing.T) {
	f := startProcFleet(t, 3)
	token := f.sim.Markets()[0].Tokens[0]
	query := "tokenId=" + token
	// A subscriber on each replica: every replica follows the stream.
	type sub struct {
		mu  sync.Mutex
		ids []string
	}
	subs := make([]*sub, len(f.replicas))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i, rep := range f.replicas {
		s := &sub{}
		subs[i] = s
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+rep.addr+"/v1/orderbook/stream?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+keyAll)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("replica %d: %v %v", i, resp, err)
		}
		wg.Go(func() {
			defer resp.Body.Close()
			r := newSSEReader(resp.Body)
			for {
				ev, err := r.next()
				if err != nil {
					return
				}
				if ev.id != "" {
					s.mu.Lock()
					s.ids = append(s.ids, ev.id)
					s.mu.Unlock()
				}
			}
		})
	}
	var old *replica
	testkit.Eventually(t, "one replica polls", func() bool { old = f.leader(); return old != nil })
	time.Sleep(2 * time.Second)
	killed := time.Now()
	old.proc.Stop() // SIGKILL
	var next *replica
	testkit.Eventually(t, "another replica takes the lease", func() bool { next = f.leader(); return next != nil })
	took := time.Since(killed)
	t.Logf("lease taken over %v after the holder was killed", took)
	if took > 3*time.Second {
		t.Errorf("takeover took %v; the lease is 1s", took)
	}
	for i, rep := range f.replicas {
		if rep == old {
			continue
		}
		s := subs[i]
		var ids []string
		// At least 10 events: some from the new holder's polls. How soon
		// they come depends on the machine's load, not on the takeover,
		// which is timed above.
		testkit.Eventually(t, fmt.Sprintf("10 events on replica %d's subscriber", i), func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			ids = append(ids[:0], s.ids...)
			return len(ids) >= 10
		})
		f.checkExactlyOnce(t, query, ids)
	}
}

// lb is a load balancer in front of the replicas, as a browser meets
// the fleet: each new request goes to the next replica that answers, and
// it adds the API key, which a browser's EventSource cannot send.
type lb struct {
	f    *procFleet
	mu   sync.Mutex
	next int
	// streams counts the stream requests each replica got.
	streams map[*replica]int
	page    string
}

func (b *lb) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/" {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, b.page)
		return
	}
	var rep *replica
	b.mu.Lock()
	for range b.f.replicas {
		c := b.f.replicas[b.next%len(b.f.replicas)]
		b.next++
		if c.proc.Pid() != 0 {
			rep = c
			break
		}
	}
	if strings.HasSuffix(r.URL.Path, "/stream") {
		b.streams[rep]++
	}
	b.mu.Unlock()
	target, _ := url.Parse("http://" + rep.addr)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rp.ErrorLog = log.New(io.Discard, "", 0) // a killed replica's cut body is the point
	r.Header.Set("Authorization", "Bearer "+keyAll)
	rp.ServeHTTP(w, r)
}

// The browser's EventSource follows a stream through a load balancer;
// the replica serving it is killed; the browser reconnects, the load
// balancer sends it to another replica with its Last-Event-ID, and every
// event arrives exactly once, in order, as the simulated host has them.
func TestStreamBrowserFailover(t *testing.T) {
	browsertest.Chromium(t)
	f := startProcFleet(t, 3)
	token := f.sim.Markets()[0].Tokens[0]
	query := "tokenId=" + token
	b := &lb{f: f, streams: map[*replica]int{}, page: `<!doctype html><title>stream</title><script>
window.events = []; window.opens = 0;
const es = new EventSource("/v1/orderbook/stream?` + query + `");
es.onopen = () => { window.opens++; };
for (const type of ["book", "price_change"]) {
  es.addEventListener(type, (e) => { window.events.push(e.lastEventId); });
}
</script>`}
	front := httptest.NewServer(b)
	t.Cleanup(front.Close)
	ctx := browsertest.Browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(front.URL+"/")); err != nil {
		t.Fatal(err)
	}
	events := func() []string {
		ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.events`))
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	testkit.Eventually(t, "five events in the browser", func() bool { return len(events()) >= 5 })
	// The replica serving the browser's stream is the only one with one.
	b.mu.Lock()
	var serving *replica
	for rep, n := range b.streams {
		if n > 0 {
			serving = rep
		}
	}
	b.mu.Unlock()
	before := len(events())
	serving.proc.Stop() // SIGKILL
	testkit.Eventually(t, "events after the reconnection", func() bool { return len(events()) >= before+8 })
	opens, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.opens`))
	if err != nil {
		t.Fatal(err)
	}
	if opens < 2 {
		t.Fatalf("the browser opened the stream %d times", opens)
	}
	ids := events()
	browsertest.SaveArtifact(t, "stream-failover-events.json", []byte(strings.Join(ids, "\n")))
	f.checkExactlyOnce(t, query, ids)
}
