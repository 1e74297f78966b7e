package main

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"tradergate/bench/fixture"
	"tradergate/bench/load"
)

func testFixtures() fixture.Fixtures {
	f := fixture.Fixtures{End: 1_700_000_000}
	for i := range 16 {
		f.Wallets = append(f.Wallets, fmt.Sprintf("0x%040x", i))
		f.Tokens = append(f.Tokens, fmt.Sprint(1000+i))
	}
	for i := range 1500 {
		f.TradeTxs = append(f.TradeTxs, fmt.Sprintf("0x%064x", i))
	}
	f.ComboTxs = []string{fmt.Sprintf("0x%064x", 99999)}
	return f
}

func TestZipfKeys(t *testing.T) {
	f := testFixtures()
	keys := zipfKeys(f, 10000, 1)
	if len(keys) != 10000 {
		t.Fatalf("%d keys", len(keys))
	}
	seen := map[string]bool{}
	kinds := map[string]int{}
	for _, k := range keys {
		if seen[k] {
			t.Fatalf("duplicate key %s", k)
		}
		seen[k] = true
		switch {
		case strings.HasPrefix(k, "/v1/tx/"):
			kinds["tx"]++
		case strings.Contains(k, "/activity?toTimestamp="):
			kinds["range"]++
		case strings.Contains(k, "/activity?limit="):
			kinds["head"]++
		case strings.Contains(k, "/positions/open"):
			kinds["open"]++
		case strings.HasPrefix(k, "/v1/orderbook/events?"):
			kinds["book"]++
		default:
			t.Fatalf("unexpected key %s", k)
		}
	}
	// Only 1501 transactions exist: the settled ranges take the rest of
	// their 20%.
	want := map[string]int{"tx": 1501, "range": 3000 + 499, "head": 1000, "open": 1000, "book": 3000}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%s: %d keys, want %d", k, kinds[k], n)
		}
	}
	if !slices.Equal(keys, zipfKeys(f, 10000, 1)) {
		t.Error("same seed, different universe")
	}
	if slices.Equal(keys, zipfKeys(f, 10000, 2)) {
		t.Error("different seeds, same order")
	}
	// Shuffled: the most popular 100 are not all one kind.
	top := map[string]bool{}
	for _, k := range keys[:100] {
		top[strings.SplitN(k, "/", 4)[2]] = true
	}
	if len(top) < 2 {
		t.Errorf("top ranks are all one kind: %v", top)
	}
}

func TestBuildScenarios(t *testing.T) {
	f := testFixtures()
	scs := buildScenarios(f, scenarioOptions{zipfKeys: 1000, firstGzipPages: 500, stampedeRounds: 4, stampedeConns: 256, seed: 1})
	var names []string
	for _, sc := range scs {
		names = append(names, sc.name)
	}
	want := "hit-tx hit-tx-gzip hit-activity20 hit-activity20-gzip hit-orderbook1000 hit-orderbook1000-heap hit-orderbook1000-gzip hit-orderbook1000-gzip-heap hit-activity20-redis fleet-l2-hit fleet-l2-miss miss miss-full stampede first-gzip-hit zipf zipf100k zipf100k-one " +
		"tls-h2-hit-tx tls-h2-hit-tx-gzip tls-h2-hit-activity20 tls-h2-hit-activity20-gzip tls-h1-hit-tx tls-h1-hit-tx-gzip tls-h1-hit-activity20 tls-h1-hit-activity20-gzip tls-new-conn tls-resumed idle-h1 idle-h2"
	for _, n := range sweepLimits {
		want += fmt.Sprintf(" sweep-orderbook%d-file sweep-orderbook%d-heap", n, n)
	}
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("scenarios %q", got)
	}
	// Every hit page, both encodings, runs on the fasthttp ceiling and
	// nginx; the net/http ceilings stay for reference.
	for _, name := range hitScenarios() {
		for _, n := range []string{name, name + "-gzip"} {
			sc := scenarioByName(scs, n)
			for _, k := range []serverKind{kindTradergate, kindCeilingFast, kindCeiling, kindCeilingHeaders, kindNginx, kindNginxTuned, kindVarnish} {
				if !slices.Contains(sc.servers, k) {
					t.Errorf("%s does not run on %s: %v", n, k, sc.servers)
				}
			}
		}
	}

	// The order book's answers again, on tradergate alone with page
	// files off.
	for _, name := range []string{"hit-orderbook1000", "hit-orderbook1000-gzip"} {
		b, h := scenarioByName(scs, name), scenarioByName(scs, name+"-heap")
		if !h.heap || b.heap || h.base != b.name || h.gzip != b.gzip || !slices.Equal(h.urls, b.urls) || !h.hit ||
			!slices.Equal(h.servers, []serverKind{kindTradergate}) || h.label() != "tradergate-heap" || b.label() != "" ||
			!h.variant("").noPageFiles || b.variant("").noPageFiles {
			t.Errorf("%s: %+v", h.name, h)
		}
	}
	// The sweep: each length from a page file, then from the heap, on
	// tradergate alone, the same page; run only when -only names it.
	for _, n := range sweepLimits {
		name := fmt.Sprintf("sweep-orderbook%d", n)
		fs, hs := scenarioByName(scs, name+"-file"), scenarioByName(scs, name+"-heap")
		if !fs.allFiles || fs.heap || !hs.heap || hs.allFiles || fs.label() != "tradergate-file" || hs.label() != "tradergate-heap" ||
			!fs.variant("").allPageFiles || fs.variant("").noPageFiles || !hs.variant("").noPageFiles || hs.variant("").allPageFiles ||
			!slices.Equal(fs.urls, hs.urls) || !strings.HasSuffix(fs.urls[0], fmt.Sprintf("&limit=%d", n)) || fs.gzip || hs.gzip || !fs.hit ||
			!slices.Equal(fs.servers, []serverKind{kindTradergate}) || !slices.Equal(hs.servers, fs.servers) {
			t.Errorf("%s: %+v %+v", name, fs, hs)
		}
		if wanted(fs, "") || wanted(hs, "hit") || !wanted(fs, "sweep") || !wanted(hs, "hit,"+name) {
			t.Errorf("%s: chosen without -only naming it, or not when named", name)
		}
	}
	if !wanted(scenarioByName(scs, "hit-tx"), "") {
		t.Error("a scenario that is not opt-in is left out of a run of everything")
	}
	if r := scenarioByName(scs, "hit-activity20-redis"); r.label() != "tradergate+redis" || r.variant("x").redisAddr != "x" {
		t.Errorf("redis row label %q", r.label())
	}

	// first-gzip-hit: the pages are stored, then each asked once for gzip.
	fg := scenarioByName(scs, "first-gzip-hit")
	if fg.prefill != 500 || fg.count != 500 || !fg.gzip || !fg.hit || fg.mode != load.ModeSequence || len(fg.tmpl) != len(f.Wallets) || fg.base != "hit-activity20-gzip" {
		t.Fatalf("first-gzip-hit %+v", fg)
	}
	// zipf100k: 100,000 distinct 5-item pages, all stored, 1 GiB cache.
	z := scenarioByName(scs, "zipf100k")
	if len(z.urls) != 100_000 || z.prefill != 100_000 || z.cacheBytes != 1<<30 || !z.hit || z.mode != load.ModeZipf {
		t.Fatalf("zipf100k: %d urls, prefill %d, cache %d", len(z.urls), z.prefill, z.cacheBytes)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(z.urls)))) != 100_000 || !strings.HasSuffix(z.urls[99_999], "&limit=5") {
		t.Fatal("zipf100k pages are not 100,000 distinct 5-item pages")
	}
	// The prefill stores exactly the pages the Zipf draws from.
	if got := load.SequenceTargets(z.tmpl, z.start, 1, int64(z.prefill)); !slices.Equal(got, z.urls) {
		t.Fatal("zipf100k's prefill and its Zipf universe differ")
	}
	one := scenarioByName(scs, "zipf100k-one")
	if len(one.urls) != 1 || one.urls[0] != z.urls[0] || one.cacheBytes != z.cacheBytes || one.prefill != 0 {
		t.Fatalf("zipf100k-one %+v", one)
	}
	// Settled: an hour before the newest data at least.
	if !strings.Contains(z.urls[0], "toTimestamp=1699996400&") {
		t.Fatalf("zipf100k first page %s", z.urls[0])
	}
	st := scenarioByName(scs, "stampede")
	if len(st.urls) != 4 || st.conns != 256 || len(slices.Compact(slices.Clone(st.urls))) != 4 {
		t.Fatalf("stampede urls %v conns %d", st.urls, st.conns)
	}
	if act := scenarioByName(scs, "hit-activity20").urls[0]; act != "/v1/trader/"+f.Wallets[0]+"/activity?toTimestamp=1699996400&limit=20" {
		t.Fatalf("activity page %s", act)
	}
}

func TestSelected(t *testing.T) {
	for _, tc := range []struct {
		name, only string
		want       bool
	}{
		{"hit-tx", "", true},
		{"hit-tx-gzip", "hit", true},
		{"hit-activity20-redis", "hit-activity20", true},
		{"miss", "hit,miss", true},
		{"zipf", "hit, miss", false},
		{"stampede", " stampede ", true},
	} {
		if got := selected(tc.name, tc.only); got != tc.want {
			t.Errorf("selected(%q, %q) = %v", tc.name, tc.only, got)
		}
	}
}

func TestSpecForBoundedAndMemoryRows(t *testing.T) {
	f := testFixtures()
	scs := buildScenarios(f, scenarioOptions{zipfKeys: 1000, firstGzipPages: 500, stampedeRounds: 4, stampedeConns: 256, seed: 1})
	b := &bench{opt: options{warmup: time.Second, duration: 10 * time.Second, connections: 32}, clientKey: "k", upstream: &server{addr: "127.0.0.1:1"}}
	b.procs = newProcs(t.TempDir(), t.TempDir(), 0)
	tg := &server{addr: "127.0.0.1:2", admin: "127.0.0.1:3", proc: &proc{cmd: &exec.Cmd{Process: &os.Process{Pid: 42}}}}

	fg := scenarioByName(scs, "first-gzip-hit")
	s := b.spec(fg, kindTradergate, tg, "")
	if s.SeqCount != 500 || s.Warmup != 0 || s.CheckCache != "HIT" || s.SampleEvery != 4 || !slices.Contains(s.Headers, "Accept-Encoding: gzip") {
		t.Fatalf("first-gzip-hit spec: count %d warm-up %v check %q headers %v", s.SeqCount, s.Warmup, s.CheckCache, s.Headers)
	}
	if s.MetricsURL != "http://127.0.0.1:3/metrics" || !slices.Contains(s.Metrics, metricGCCPU) || !slices.Contains(s.Metrics, metricGCPauses) {
		t.Fatalf("metrics %q %v", s.MetricsURL, s.Metrics)
	}
	// The estimate counts the prefill's misses.
	if d := b.estimate(scs, []row{{Scenario: "zipf100k", Server: kindTradergate}}); d < 25*time.Second {
		t.Fatalf("zipf100k estimated at %v", d)
	}
	// Other servers are not scraped; unbounded rows keep their warm-up.
	miss := scenarioByName(scs, "miss-full")
	if s := b.spec(miss, kindPassthrough, tg, ""); s.MetricsURL != "" || s.SeqCount != 0 || s.Warmup != fullCacheWarmup {
		t.Fatalf("passthrough spec: metrics %q count %d warm-up %v", s.MetricsURL, s.SeqCount, s.Warmup)
	}
	// The fasthttp ceiling has tradergate's front limits (config.yaml's
	// server section).
	fl, err := frontLimits()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(ceilingArgs(kindCeilingFast, fl), " "), "-engine fasthttp -headers -read-timeout 5s -write-timeout 30s -idle-timeout 2m0s -read-buffer 16384"; got != want {
		t.Fatalf("fasthttp ceiling args %q, want %q", got, want)
	}
	if got := ceilingArgs(kindCeiling, fl); strings.Join(got, " ") != "-engine nethttp" {
		t.Fatalf("ceiling args %v", got)
	}
}
