package main

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"tradergate/bench/cpustat"
	"tradergate/bench/load"
)

func TestRowFill(t *testing.T) {
	res := &load.Result{
		Requests: 50000, Errors: 3, Status: map[int]int64{200: 49997, 503: 3}, RPS: 5000, BodyBytes: 50000 * 100,
		Latency:     load.Latency{P50: 150 * time.Microsecond, P99: 2500 * time.Microsecond},
		ServerCPU:   cpustat.CPUTimes{User: 800, System: 150, SoftIRQ: 50, Idle: 0},
		LoadCPU:     cpustat.CPUTimes{User: 500, Idle: 500},
		CPUMeasured: true, Upstream: 0, UpstreamMeasured: true,
		CacheSampled: 700, Cache: map[string]int64{"HIT": 700},
	}
	var r row
	r.Server = kindTradergate
	r.fill(&scenario{name: "hit-activity20", mode: load.ModeList, hit: true}, res, 100)
	// 1000 busy ticks at 100 Hz = 10 s of CPU over 50000 requests.
	if r.CPUus != 200 || r.ServerBusy != 1 || r.LoadBusy != 0.5 || r.Upstream != 0 || r.BytesPerResp != 100 {
		t.Fatalf("cpu %v busy %v/%v upstream %d bytes %v", r.CPUus, r.ServerBusy, r.LoadBusy, r.Upstream, r.BytesPerResp)
	}
	notes := strings.Join(r.Notes, "; ")
	for _, want := range []string{"errors: 3×503", "X-Cache: HIT on all 700 sampled"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes %q lack %q", notes, want)
		}
	}
}

func TestComputeRatiosAndCells(t *testing.T) {
	rows := []row{
		{Scenario: "hit-activity20", Server: kindTradergate, RPS: 45000, Upstream: 0, RSSBytes: 50 << 20},
		{Scenario: "hit-activity20", Server: kindCeilingFast, RPS: 50000, Upstream: -1},
		{Scenario: "hit-activity20", Server: kindCeiling, RPS: 25000, Upstream: -1},
		{Scenario: "hit-activity20", Server: kindNginx, RPS: 40000, Upstream: 10},
		{Scenario: "hit-activity20-redis", Base: "hit-activity20", Server: kindTradergate, Label: "tradergate+redis", RPS: 20000},
		{Scenario: "stampede", Server: kindTradergate, RPS: 900, UpstreamPerRound: []int64{1, 1}},
		{Scenario: "miss", Server: kindNginx, Skipped: "nginx is not installed"},
	}
	computeRatios(rows)
	// ×ceiling is against the fasthttp ceiling, not net/http's.
	if rows[0].VsCeiling != 0.9 || rows[0].VsNginx != 1.125 || rows[2].VsCeiling != 0.5 || rows[4].VsCeiling != 0.4 || rows[5].VsCeiling != 0 {
		t.Fatalf("ratios: %v %v %v %v %v", rows[0].VsCeiling, rows[0].VsNginx, rows[2].VsCeiling, rows[4].VsCeiling, rows[5].VsCeiling)
	}
	c := rows[0].cells()
	if got := strings.Join(c, "|"); got != "hit-activity20|tradergate|45000|—|—|0.0|0.0|0%|0|0|50 MiB|0.90|1.12" {
		t.Fatalf("cells %q", got)
	}
	if c := rows[1].cells(); c[8] != "—" || c[10] != "—" || c[11] != "1.00" {
		t.Fatalf("ceiling cells %q", c)
	}
	if c := rows[5].cells(); c[2] != "—" {
		t.Fatalf("stampede req/s cell %q, want —", c[2])
	}
	var text, md bytes.Buffer
	if err := writeTable(&text, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "skipped: nginx is not installed") || !strings.Contains(text.String(), "tradergate+redis") {
		t.Fatalf("text table:\n%s", text.String())
	}
	writeMarkdownTable(&md, rows)
	lines := strings.Split(strings.TrimSpace(md.String()), "\n")
	if len(lines) != 2+len(rows) || !strings.HasPrefix(lines[1], "|---|---|---:|") {
		t.Fatalf("markdown:\n%s", md.String())
	}
	for _, l := range lines {
		if strings.Count(l, "|")-strings.Count(l, `\|`) != len(tableHeader())+2 {
			t.Fatalf("markdown line has the wrong number of cells: %q", l)
		}
	}
}

func TestFormatting(t *testing.T) {
	for us, want := range map[float64]string{0: "—", 87.4: "87µs", 1234: "1.23ms", 250000: "250ms"} {
		if got := fmtLatency(us); got != want {
			t.Errorf("fmtLatency(%v) = %q, want %q", us, got, want)
		}
	}
	if stampedeVerdict([]int64{1, 1, 1}, 3)[:2] != "OK" || stampedeVerdict([]int64{1, 2}, 2)[:4] != "FAIL" || !strings.Contains(stampedeVerdict(nil, 3), "not measured") {
		t.Error("stampede verdicts")
	}
	if got := cacheSummary(map[string]int64{"HIT": 3, "": 1}); got != "HIT 75.0%, (none) 25.0%" {
		t.Errorf("cacheSummary = %q", got)
	}
}

func TestCheckTargets(t *testing.T) {
	rows := []row{
		// tx: below nginx and within 1.25 × the ceiling, both encodings.
		{Scenario: "hit-tx", Server: kindTradergate, CPUus: 30, ProcCPUus: 25, Requests: 1},
		{Scenario: "hit-tx", Server: kindNginx, CPUus: 32, ProcCPUus: 28, Requests: 1},
		{Scenario: "hit-tx", Server: kindCeilingFast, CPUus: 25, Requests: 1},
		{Scenario: "hit-tx", Server: kindCeilingHeaders, CPUus: 45, Requests: 1},
		{Scenario: "hit-tx-gzip", Server: kindTradergate, CPUus: 30, Requests: 1},
		{Scenario: "hit-tx-gzip", Server: kindNginx, CPUus: 31, Requests: 1},
		{Scenario: "hit-tx-gzip", Server: kindCeilingFast, CPUus: 24, Requests: 1},
		// activity20: identity below nginx, gzip equal (not below); 40 is
		// exactly 1.25 × 32 (passes), gzip 41 > 1.25 × 32.
		{Scenario: "hit-activity20", Server: kindTradergate, CPUus: 40, Requests: 1},
		{Scenario: "hit-activity20", Server: kindNginx, CPUus: 42, Requests: 1},
		{Scenario: "hit-activity20", Server: kindCeilingFast, CPUus: 32, Requests: 1},
		{Scenario: "hit-activity20-gzip", Server: kindTradergate, CPUus: 41, Requests: 1},
		{Scenario: "hit-activity20-gzip", Server: kindNginx, CPUus: 41, Requests: 1},
		{Scenario: "hit-activity20-gzip", Server: kindCeilingFast, CPUus: 32, Requests: 1},
		// orderbook1000: nginx skipped; the gzip ceiling row failed.
		{Scenario: "hit-orderbook1000", Server: kindTradergate, CPUus: 100, Requests: 1},
		{Scenario: "hit-orderbook1000", Server: kindNginx, Skipped: "nginx is not installed"},
		{Scenario: "hit-orderbook1000", Server: kindCeilingFast, CPUus: 90, Requests: 1},
		{Scenario: "hit-orderbook1000-gzip", Server: kindTradergate, CPUus: 60, Requests: 1},
		{Scenario: "hit-orderbook1000-gzip", Server: kindCeilingFast, Failed: "start: boom"},
		{Scenario: "hit-orderbook1000-gzip-heap", Server: kindTradergate, Label: "tradergate-heap", CPUus: 40, Requests: 1},
		{Scenario: "first-gzip-hit", Server: kindTradergate, CPUus: 82, Requests: 9000},
		{Scenario: "miss", Server: kindTradergate, CPUus: 100, Requests: 1},
		{Scenario: "miss", Server: kindPassthrough, CPUus: 90, Requests: 1},
		{Scenario: "miss", Server: kindNginx, CPUus: 95, Requests: 1},
		{Scenario: "miss-full", Server: kindTradergate, CPUus: 130, Requests: 1, CacheMaxBytes: 256 << 20, RSSBytes: 500 << 20, PeakRSSBytes: 520 << 20, GCSource: "pauses", GCCPU: 0.004, MemLimit: 9.2e18, Evictions: 1000},
		{Scenario: "miss-full", Server: kindPassthrough, CPUus: 100, Requests: 1},
		{Scenario: "miss-full", Server: kindNginx, CPUus: 140, Requests: 1},
		{Scenario: "zipf100k", Server: kindTradergate, CPUus: 33, Requests: 1},
		{Scenario: "zipf100k-one", Server: kindTradergate, CPUus: 30, Requests: 1},
		{Scenario: "stampede", Server: kindTradergate, Requests: 1, UpstreamPerRound: []int64{1, 1}, RoundsWanted: 2},
		{Scenario: "hit-orderbook1000-heap", Server: kindTradergate, Label: "tradergate-heap", CPUus: 125, Requests: 1},
	}
	vs := checkTargets(rows)
	// hit-tx: PASS PASS; hit-activity20: FAIL (gzip not below) FAIL (gzip
	// over 1.25×); hit-orderbook1000: n/a (no nginx), n/a (identity passes,
	// gzip not measured); first gzip hit and zipf100k: info; miss 100 <=
	// 1.2 × 90 but > nginx's 95, miss-full 130 > 1.2 × 100 but <= nginx's
	// 140; memory 500 MiB <= 1.5 × 256 + 64 = 448 MiB fails; one call per
	// round; normalization n/a. The peers', TLS and fleet targets follow,
	// n/a without their rows.
	checkVerdicts(t, vs[:16], "PASS PASS FAIL FAIL n/a n/a info info info PASS FAIL FAIL PASS FAIL PASS n/a", map[int]string{
		0:  "hit-tx: 30.0 vs 32.0 CPU µs (×0.94), own time 25.0 vs 28.0 (×0.89); hit-tx-gzip: 30.0 vs 31.0 CPU µs (×0.97)",
		1:  "hit-tx: 30.0 vs 25.0 CPU µs (×1.20); ceiling+headers 45.0; hit-tx-gzip",
		4:  "needs the tradergate and nginx rows of hit-orderbook1000, hit-orderbook1000-gzip",
		5:  "needs the tradergate and ceiling-fasthttp rows of hit-orderbook1000-gzip",
		6:  "82.0 CPU µs over 9000 pages",
		7:  "33.0 vs 30.0 CPU µs/hit (×1.10)",
		8:  "hit-orderbook1000: 100.0 vs 125.0 CPU µs (×0.80); cheaper in this run: the page file; hit-orderbook1000-gzip: 60.0 vs 40.0 CPU µs (×1.50); cheaper in this run: the heap",
		10: "miss: 100.0 vs 95.0 CPU µs (×1.05)",
		12: "miss-full: 130.0 vs 140.0 CPU µs (×0.93)",
		13: "RSS 500 MiB at the window's end (peak 520 MiB) vs 448 MiB for cache.max_bytes 256 MiB; GC stop-the-world pauses 0.40% of the core (GC CPU itself not exported), Go memory limit none (GOMEMLIMIT unset)",
	})
	// Without the identity form's heap row, the gzip form is still told.
	if v := checkTargets(rows[:len(rows)-1])[8]; v.Status != "info" || !strings.Contains(v.Detail, "hit-orderbook1000-gzip: 60.0 vs 40.0") ||
		!strings.HasSuffix(v.Detail, "needs the tradergate and tradergate-heap rows of hit-orderbook1000") {
		t.Errorf("page file verdict without the identity heap row: %+v", v)
	}
	// A miss-full window without evictions did not run on a full cache.
	rows[23].Evictions = 0
	if v := checkTargets(rows)[13]; v.Status != "n/a" || !strings.Contains(v.Detail, "the cache was not full") {
		t.Errorf("memory verdict without evictions: %+v", v)
	}
	if !strings.Contains(vs[1].Target, "1.25 × the fasthttp ceiling") {
		t.Errorf("ceiling target %q", vs[1].Target)
	}
}

func TestPairedVerdict(t *testing.T) {
	// The median rows say ×1.05 (20 vs 19), but run by run tradergate
	// was below nginx in two of three repetitions (×0.91, ×1.05, ×0.91);
	// the second repetition of the ceiling failed, so two pairs remain.
	rows := []row{
		{Scenario: "hit-tx", Server: kindTradergate, CPUus: 20, Requests: 1, RunCPUus: []float64{10, 20, 30}},
		{Scenario: "hit-tx", Server: kindNginx, CPUus: 19, Requests: 1, RunCPUus: []float64{11, 19, 33}},
		{Scenario: "hit-tx", Server: kindCeilingFast, CPUus: 15, Requests: 1, RunCPUus: []float64{5, 0, 15}},
	}
	for _, r := range rows[:3] {
		r.Scenario = "hit-tx-gzip"
		rows = append(rows, r)
	}
	vs := checkTargets(rows)
	if vs[0].Status != "PASS" || !strings.Contains(vs[0].Detail, "hit-tx: 20.0 vs 19.0 CPU µs (×1.05), run by run ×0.91 ×1.05 ×0.91: median ×0.91") {
		t.Errorf("nginx verdict %+v", vs[0])
	}
	// Against the ceiling: ×2.00 and ×2.00, median ×2.00, where the
	// median rows say ×1.33; both fail.
	if vs[1].Status != "FAIL" || !strings.Contains(vs[1].Detail, "run by run ×2.00 ×2.00: median ×2.00") {
		t.Errorf("ceiling verdict %+v", vs[1])
	}
	// Rows of different repetition counts are not paired.
	rows[1].RunCPUus = []float64{19}
	if v := checkTargets(rows)[0]; v.Status != "FAIL" || strings.Contains(v.Detail, "hit-tx: 20.0 vs 19.0 CPU µs (×1.05), run by run") {
		t.Errorf("unpaired verdict %+v", v)
	}
	if got := median([]float64{3, 1, 2, 4}); got != 2.5 {
		t.Errorf("median %v", got)
	}
}

func TestMemoryFigures(t *testing.T) {
	res := &load.Result{
		Window:        10 * time.Second,
		MetricsBefore: map[string]float64{metricGCCPU: 1, metricGCPauses + "_sum": 0.1, metricEvicted: 100},
		MetricsAfter:  map[string]float64{metricGCCPU: 1.5, metricGCPauses + "_sum": 0.11, metricEvicted: 5100, metricMemLimit: 400 << 20, metricCache: 256 << 20},
		RSSMeasured:   true, ServerRSS: 430 << 20, ServerPeakRSS: 440 << 20,
		ProcMeasured: true, ServerMinorFaults: 300000,
		Requests: 40000,
	}
	r := row{Server: kindTradergate, CacheMaxBytes: 256 << 20}
	r.fill(&scenario{name: "miss-full", mode: load.ModeSequence}, res, 100)
	// The runtime's GC CPU when exported: 0.5 s over 10 s.
	if r.GCSource != "runtime" || r.GCCPU != 0.05 || r.Evictions != 5000 || r.RSSBytes != 430<<20 || r.MemLimit != 400<<20 {
		t.Fatalf("figures %+v", r)
	}
	notes := strings.Join(r.Notes, "; ")
	if want := "memory at the end: RSS 430 MiB (peak 440 MiB), cache 256 MiB held of cache.max_bytes 256 MiB, 5000 evictions in the window; GC 5.0% of the core, Go memory limit 400 MiB; 7.5 minor page faults per request"; !strings.Contains(notes, want) {
		t.Fatalf("notes %q lack %q", notes, want)
	}
	// Without the runtime's figure: the pauses, said as such.
	delete(res.MetricsAfter, metricGCCPU)
	r = row{Server: kindTradergate}
	r.fill(&scenario{name: "miss-full", mode: load.ModeSequence}, res, 100)
	if r.GCSource != "pauses" || math.Abs(r.GCCPU-0.001) > 1e-9 {
		t.Fatalf("pauses: %+v", r)
	}
	// A hit row gets no memory note.
	r = row{Server: kindTradergate}
	r.fill(&scenario{name: "hit-tx", mode: load.ModeList, hit: true}, res, 100)
	if strings.Contains(strings.Join(r.Notes, "; "), "memory") {
		t.Fatalf("hit row notes %q", r.Notes)
	}
	if memoryBound(256<<20) != 448<<20 {
		t.Fatalf("bound %v", memoryBound(256<<20))
	}
}

func TestForeignShare(t *testing.T) {
	res := &load.Result{
		ServerCPU:   cpustat.CPUTimes{User: 700, System: 200, SoftIRQ: 100},
		CPUMeasured: true, ServerProcJiffies: 600, ProcMeasured: true,
	}
	// busy 1000 = server 600 + softirq 100 + someone else's 300.
	if f := foreignShare(res); f != 0.3 {
		t.Fatalf("foreign share %v, want 0.3", f)
	}
	res.ServerProcJiffies = 950 // accounted beyond busy: nothing foreign
	if f := foreignShare(res); f != 0 {
		t.Fatalf("foreign share %v, want 0", f)
	}
	res.ProcMeasured = false
	if f := foreignShare(res); f != 0 {
		t.Fatalf("foreign share without process figures %v, want 0", f)
	}
}

func TestCombine(t *testing.T) {
	reps := []row{
		{Scenario: "hit-tx", Server: kindNginx, RPS: 30000, CPUus: 10},
		{Scenario: "hit-tx", Server: kindNginx, Failed: "start: boom"},
		{Scenario: "hit-tx", Server: kindNginx, RPS: 10000, CPUus: 30},
		{Scenario: "hit-tx", Server: kindNginx, RPS: 20000, CPUus: 20},
	}
	got := combine(reps)
	notes := strings.Join(got.allNotes(), "; ")
	if !slices.Equal(got.RunCPUus, []float64{10, 0, 30, 20}) {
		t.Errorf("run CPU %v", got.RunCPUus)
	}
	if got.RPS != 20000 || got.Runs != 4 || !strings.Contains(notes, "median of 3 runs (req/s 10000–30000)") || !strings.Contains(notes, "1 of 4 runs failed") {
		t.Fatalf("combined %v req/s, %d runs, notes %q", got.RPS, got.Runs, notes)
	}

	st := []row{
		{Scenario: "stampede", Server: kindTradergate, Stampede: true, Requests: 512, P50us: 110, Upstream: 2, UpstreamPerRound: []int64{1, 1}, RoundsWanted: 2},
		{Scenario: "stampede", Server: kindTradergate, Stampede: true, Requests: 512, P50us: 120, Upstream: 3, UpstreamPerRound: []int64{1, 2}, RoundsWanted: 2},
	}
	got = combine(st)
	if got.Upstream != 5 || len(got.UpstreamPerRound) != 4 || got.RoundsWanted != 4 {
		t.Fatalf("stampede combined: %+v", got)
	}
	if n := strings.Join(got.allNotes(), "; "); !strings.Contains(n, "FAIL: upstream calls per round [1 1 1 2]") {
		t.Fatalf("stampede notes %q", n)
	}
	if v := checkTargets([]row{got})[14]; v.Status != "FAIL" || !strings.HasPrefix(v.Target, "stampede") {
		t.Fatalf("stampede target %+v", v)
	}

	only := []row{{Scenario: "miss", Server: kindNginx, Skipped: "interrupted"}}
	if got := combine(only); got.Skipped != "interrupted" {
		t.Fatalf("all skipped: %+v", got)
	}
}

// checkVerdicts checks the statuses of vs, space-separated, and that the
// verdicts at the given indexes say what is given.
func checkVerdicts(t *testing.T, vs []verdict, statuses string, details map[int]string) {
	t.Helper()
	got := make([]string, len(vs))
	for i, v := range vs {
		got[i] = v.Status
	}
	if strings.Join(got, " ") != statuses {
		t.Fatalf("verdicts %v, want %s", got, statuses)
	}
	for i, want := range details {
		if !strings.Contains(vs[i].Detail, want) {
			t.Errorf("verdict %d (%s): %q lacks %q", i, vs[i].Target, vs[i].Detail, want)
		}
	}
}

// TestPageFileForms: the order book's lines say how the default sent each
// form, and the sweep finds the length from which the page file costs
// less than the heap.
func TestPageFileForms(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	rows := []row{
		{Scenario: "hit-orderbook1000", Server: kindTradergate, CPUus: 60, Requests: 1, PageFiles: n(1)},
		{Scenario: "hit-orderbook1000", Server: kindCeilingFast, CPUus: 100, Requests: 1},
		{Scenario: "hit-orderbook1000-heap", Server: kindTradergate, Label: labelHeap, CPUus: 120, Requests: 1, PageFiles: n(0)},
		{Scenario: "hit-orderbook1000-gzip", Server: kindTradergate, CPUus: 16, Requests: 1, PageFiles: n(0)},
		{Scenario: "hit-orderbook1000-gzip", Server: kindCeilingFast, CPUus: 15, Requests: 1},
		{Scenario: "hit-orderbook1000-gzip-heap", Server: kindTradergate, Label: labelHeap, CPUus: 16.5, Requests: 1, PageFiles: n(0)},
	}
	v := pageFileVerdict(rows)
	for _, want := range []string{
		"hit-orderbook1000 (sent from its page file): 60.0 vs 120.0 CPU µs (×0.50); cheaper in this run: the page file",
		"hit-orderbook1000-gzip (sent from the heap): 16.0 vs 16.5 CPU µs (×0.97); both from the heap",
	} {
		if v.Status != "info" || !strings.Contains(v.Detail, want) {
			t.Errorf("page file verdict %+v lacks %q", v, want)
		}
	}
	c := cpuVerdict(finder(rows), "t", []string{"hit-orderbook1000-gzip"}, kindCeilingFast, hitVsCeiling, false)
	if c.Status != "PASS" || !strings.HasPrefix(c.Detail, "hit-orderbook1000-gzip (sent from the heap): 16.0 vs 15.0") {
		t.Errorf("ceiling verdict %+v", c)
	}

	if v := sweepVerdict(rows); v.Status != "n/a" {
		t.Errorf("sweep verdict without its rows: %+v", v)
	}
	sweep := func(ratios map[int]float64) []row {
		var out []row
		for _, l := range sweepLimits {
			r, ok := ratios[l]
			if !ok {
				continue
			}
			name := sweepPrefix + strconv.Itoa(l)
			size := float64(l * 500)
			out = append(out,
				row{Scenario: name + "-file", Server: kindTradergate, Label: labelFile, CPUus: 10 * r, Requests: 1, BytesPerResp: size},
				row{Scenario: name + "-heap", Server: kindTradergate, Label: labelHeap, CPUus: 10, Requests: 1, BytesPerResp: size})
		}
		return out
	}
	for _, tc := range []struct {
		ratios map[int]float64
		want   string
	}{
		// Cheaper from its file at 75 KB and up; dearer at 50 KB, and at
		// 12.5 KB, where a cheaper 25 KB between does not count.
		{map[int]float64{25: 1.2, 50: 0.9, 100: 1.1, 150: 0.8, 500: 0.5}, "the page file was cheaper from 75,000 bytes up, the heap at 50,000 bytes: cache.sendfile_min_bytes between the two; file vs heap: 12,500 bytes: 12.0 vs 10.0 CPU µs (×1.20); 25,000 bytes"},
		{map[int]float64{25: 0.9, 1000: 0.5}, "the page file was cheaper at every length measured, from 12,500 bytes"},
		{map[int]float64{25: 0.9, 1000: 1}, "the heap was as cheap or cheaper at the longest length measured (500,000 bytes)"},
	} {
		if v := sweepVerdict(sweep(tc.ratios)); v.Status != "info" || !strings.HasPrefix(v.Detail, tc.want) {
			t.Errorf("sweep %v: %+v, want %q", tc.ratios, v, tc.want)
		}
	}
}

func TestTHPMode(t *testing.T) {
	for line, want := range map[string]string{
		"always [madvise] never": "madvise",
		"[always] madvise never": "always",
		"always madvise [never]": "never",
		"":                       "",
		"always madvise never":   "",
	} {
		if got := thpMode(line); got != want {
			t.Errorf("thpMode(%q) = %q, want %q", line, got, want)
		}
	}
}
