package main

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	rtrace "runtime/trace"
	"slices"
	"strings"
	"testing"
	"time"

	"tradergate/bench/load"
)

// The latency rows: per protocol, nginx's closed-loop row, then each
// share's fixed-rate rows on the group's servers; their specs run open
// loop at the share of the closed-loop row's rate, with the load
// generator's own clients over TLS.
func TestLatencyScenariosAndSpecs(t *testing.T) {
	f := testFixtures()
	scs := buildScenarios(f, scenarioOptions{zipfKeys: 1000, firstGzipPages: 500, stampedeRounds: 4, stampedeConns: 256, seed: 1, latencyPage: "activity20-gzip"})
	var names []string
	for _, sc := range scs {
		if sc.latencyGroup != "" {
			names = append(names, sc.name)
		}
	}
	want := "latency-h1-max latency-h1-25 latency-h1-50 latency-h1-75 latency-tls-h1-max latency-tls-h1-25 latency-tls-h1-50 latency-tls-h1-75 latency-tls-h2-max latency-tls-h2-25 latency-tls-h2-50 latency-tls-h2-75"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("latency rows %q\nwant %q", got, want)
	}
	h1 := scenarioByName(scs, "latency-h1-50")
	if !h1.gzip || h1.urls[0] != hitPages(f)[1].url || h1.rate.base != "latency-h1-max" || h1.rate.share != 0.5 ||
		!slices.Equal(h1.servers, []serverKind{kindTradergate, kindNginx, kindNginxTuned, kindVarnish}) {
		t.Fatalf("latency-h1-50: %+v", h1)
	}
	if m := scenarioByName(scs, "latency-tls-h2-max"); m.rate != nil || !slices.Equal(m.servers, []serverKind{kindNginx}) || m.proto != protoGoH2 || m.proto.h2load() {
		t.Fatalf("latency-tls-h2-max: %+v", m)
	}

	b := &bench{opt: options{warmup: time.Second, duration: 10 * time.Second, connections: 32}, clientKey: "k", upstream: &server{addr: "127.0.0.1:1"},
		maxRates: map[string]float64{}, cert: certFiles{cert: "/c.pem"}}
	b.procs = newProcs(t.TempDir(), t.TempDir(), 0)
	tg := &server{addr: "127.0.0.1:2", admin: "127.0.0.1:3", tls: true, proc: &proc{cmd: &exec.Cmd{Process: &os.Process{Pid: 42}}}}
	h2 := scenarioByName(scs, "latency-tls-h2-75")
	if _, err := b.latencyRate(h2); err == nil || !strings.Contains(err.Error(), "latency-tls-h2-max") {
		t.Fatalf("a rate without its closed-loop row: %v", err)
	}
	b.maxRates["latency-tls-h2-max"] = 40000
	if r, err := b.latencyRate(h2); err != nil || r != 30000 {
		t.Fatalf("rate %v, %v", r, err)
	}
	s := b.spec(h2, kindTradergate, tg, "")
	if s.Mode != load.ModeList || s.Command != nil || s.TLS == nil || !s.TLS.HTTP2 || s.TLS.NewConnection || s.Streams != h2loadStreams ||
		s.Duration != latencyWindow || s.CheckCache != "HIT" || !slices.Contains(s.Histograms, metricSchedLatency) || !slices.Contains(s.Metrics, metricGCAssist) {
		t.Fatalf("latency-tls-h2-75 spec: %+v", s)
	}
	if s := b.spec(scenarioByName(scs, "latency-tls-h1-max"), kindNginx, tg, ""); s.TLS == nil || s.TLS.HTTP2 || s.Duration != latencyMaxWindow || s.Histograms != nil {
		t.Fatalf("latency-tls-h1-max spec: %+v", s)
	}
	// A shorter -duration shortens them too.
	b.opt.duration = 2 * time.Second
	if d := b.windowOf(h2); d != 2*time.Second {
		t.Fatalf("window %v", d)
	}
}

func TestLatencyFlags(t *testing.T) {
	for _, ok := range [][2]string{{"activity20-gzip", ""}, {"tx", "latency-h1-75"}, {"tx", "hit-activity20-gzip"}, {"orderbook1000-gzip", "latency-tls-h2-25"}, {"tx", "miss"}, {"tx", "miss-full"}} {
		if err := checkLatencyFlags(ok[0], ok[1]); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	for _, bad := range [][2]string{{"activity21", ""}, {"tx", "latency-h1-max"}, {"tx", "latency-h2-50"}, {"tx", "miss-tls"}, {"tx", "stampede"}} {
		if err := checkLatencyFlags(bad[0], bad[1]); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// latRow is a fixed-rate row with its tail figures, run by run.
func latRow(sc string, k serverKind, p99, p999 []float64) row {
	return row{Scenario: sc, Server: k, Requests: 1, Rate: 1000, RPS: 1000, P99us: median(p99), P999us: median(p999), RunP99us: p99, RunP999us: p999}
}

// The latency targets: p99 and p99.9 at most nginx's at 25% and 50%,
// 1.5 × at 75%, on plain HTTP/1.1 and HTTP/2; HTTPS/1.1 reported; run by
// run with -repeat.
func TestLatencyVerdicts(t *testing.T) {
	rows := []row{
		// 25%: equal passes.
		latRow("latency-h1-25", kindTradergate, []float64{100}, []float64{200}),
		latRow("latency-h1-25", kindNginx, []float64{100}, []float64{200}),
		// 50%: p99 below, p99.9 above: fails.
		latRow("latency-h1-50", kindTradergate, []float64{90}, []float64{210}),
		latRow("latency-h1-50", kindNginx, []float64{100}, []float64{200}),
		// 75%: 1.5 × passes, by the runs' own ratios (×1.4, ×1.6, ×1.5),
		// where the medians alone would read 300/180 = ×1.67.
		latRow("latency-h1-75", kindTradergate, []float64{140, 320, 300}, []float64{400, 500, 450}),
		latRow("latency-h1-75", kindNginx, []float64{100, 200, 200}, []float64{400, 400, 300}),
		latRow("latency-h1-75", kindVarnish, []float64{50, 60, 70}, []float64{80, 90, 100}),
		// HTTPS/1.1: reported, whatever the ratio.
		latRow("latency-tls-h1-25", kindTradergate, []float64{900}, []float64{900}),
		latRow("latency-tls-h1-25", kindNginx, []float64{100}, []float64{100}),
		// HTTP/2 at 75%: 1.6 × fails.
		latRow("latency-tls-h2-75", kindTradergate, []float64{160}, []float64{100}),
		latRow("latency-tls-h2-75", kindNginx, []float64{100}, []float64{100}),
	}
	// Served figures are reported beside the verdict, not judged.
	rows[0].ServedP99us, rows[0].ServedP999us = 50, 400
	rows[1].ServedP99us, rows[1].ServedP999us = 100, 100
	vs := latencyVerdicts(rows)
	if want := "without the load generator's own lateness, p99 50µs vs nginx 100µs (×0.50); p99.9 400µs vs nginx 100µs (×4.00)"; !strings.Contains(vs[0].Detail, want) || vs[0].Status != "PASS" {
		t.Errorf("25%% served: %+v, want %q and PASS", vs[0], want)
	}
	checkVerdicts(t, vs, "PASS FAIL PASS info n/a n/a n/a n/a FAIL", map[int]string{
		0: "at 1000 req/s: p99 100µs vs nginx 100µs (×1.00); p99.9 200µs vs nginx 200µs (×1.00)",
		2: "run by run ×1.40 ×1.60 ×1.50: median ×1.50",
		3: "900µs vs nginx 100µs (×9.00)",
	})
	if !strings.Contains(vs[2].Detail, "varnish p99 60µs") || !strings.Contains(vs[2].Target, "at most 1.5 × nginx's") {
		t.Errorf("75%%: %+v", vs[2])
	}
	// A server behind its schedule is said so.
	rows[0].Result = &load.Result{Unsent: 3}
	if v := latencyVerdicts(rows)[0]; !strings.Contains(v.Detail, "fell behind the schedule") {
		t.Errorf("unsent: %+v", v)
	}
}

// The latency table has the edge's ratio to nginx on each of its rows,
// and combine keeps the runs' tails.
func TestLatencyTableAndCombine(t *testing.T) {
	rows := []row{
		latRow("latency-h1-25", kindTradergate, []float64{150}, []float64{300}),
		latRow("latency-h1-25", kindNginx, []float64{100}, []float64{200}),
		{Scenario: "hit-tx", Server: kindNginx, Requests: 1, RPS: 5},
	}
	var b strings.Builder
	if err := writeLatencyTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "p99.9 ×nginx") || !strings.Contains(out, "1.50") || strings.Contains(out, "hit-tx") {
		t.Fatalf("table:\n%s", out)
	}
	reps := []row{
		{Scenario: "s", Server: kindTradergate, Requests: 1, Rate: 100, RPS: 100, P99us: 300, P999us: 900, ServedP99us: 200, ServedP999us: 800},
		{Scenario: "s", Server: kindTradergate, Failed: "x"},
		{Scenario: "s", Server: kindTradergate, Requests: 1, Rate: 100, RPS: 101, P99us: 100, P999us: 500, ServedP99us: 90, ServedP999us: 400},
	}
	c := combine(reps)
	if !slices.Equal(c.RunP99us, []float64{300, 0, 100}) || !slices.Equal(c.RunP999us, []float64{900, 0, 500}) || c.P99us != 100 ||
		!slices.Equal(c.RunServedP99us, []float64{200, 0, 90}) || !slices.Equal(c.RunServedP999us, []float64{800, 0, 400}) {
		t.Fatalf("combined %+v", c)
	}
	if !strings.Contains(strings.Join(c.Notes, ";"), "by p99 (p99 100µs–300µs)") {
		t.Fatalf("notes %v", c.Notes)
	}
}

func TestRuntimeNote(t *testing.T) {
	res := &load.Result{
		Window:        2 * time.Second,
		MetricsBefore: map[string]float64{metricGCCycles: 10, metricGCAssist: 0.01, metricGCCPU: 0.1},
		MetricsAfter:  map[string]float64{metricGCCycles: 30, metricGCAssist: 0.03, metricGCCPU: 0.2},
		Histograms: map[string][]load.Bucket{
			metricSchedLatency: {{Le: 1e-6, Count: 900}, {Le: 1e-3, Count: 999}, {Le: load.InfBound, Count: 1000}},
		},
	}
	n := runtimeNote(res)
	for _, want := range []string{"20 GC cycles (10.0/s)", "GC 5.00%", "assists 1.00%", "scheduling latency: 1000, p50 ≤ 1µs, p99 ≤ 1.00ms, p99.9 ≤ 1.00ms, max ≤ ∞"} {
		if !strings.Contains(n, want) {
			t.Errorf("note %q lacks %q", n, want)
		}
	}
	delete(res.Histograms, metricSchedLatency)
	if n := runtimeNote(res); !strings.Contains(n, "not exported") {
		t.Errorf("note %q", n)
	}
}

// analyzeTrace lays answers over the runtime's intervals: slow answers
// that waited through a GC mark phase with the workers running show it,
// fast ones do not.
func TestAnalyzeTrace(t *testing.T) {
	start := time.Unix(100, 0)
	base := start.UnixNano()
	ms := func(x float64) int64 { return base + int64(x*1e6) }
	f := &traceFacts{
		from: ms(-100), to: ms(1100),
		mark:  []span{{ms(500), ms(503)}},
		stw:   []span{{ms(500), ms(500.05)}},
		gcRun: []span{{ms(500.1), ms(502)}},
		// The P runs all the time but for 1ms at 800.
		busy:  []span{{ms(-100), ms(800)}, {ms(801), ms(1100)}},
		waits: []wait{{span{ms(500.1), ms(502)}, false, wakeSysmon}},
	}
	var answers [][4]int64
	// 1000 answers, one every ms, 50µs each, except the 10 due at
	// 495..504ms, which waited for the mark phase's end (503ms) and one
	// at 799.5ms that waited 1.5ms with no P running.
	for i := range 1000 {
		lat := int64(50)
		if i >= 495 && i < 505 {
			lat = max(50, 503_000-int64(i)*1000)
		}
		answers = append(answers, [4]int64{int64(i) * 1000, lat, 0, 0})
	}
	answers = append(answers, [4]int64{799_500, 1500, 1000, 600})
	answers = append(answers, [4]int64{-200_000, 50, 0, 0}) // before the trace: left out
	rep := analyzeTrace(f, start, answers)
	if rep.answers != 1001 || rep.outside != 1 || rep.slow.n != 11 || rep.cycles != 1 {
		t.Fatalf("report %+v", rep)
	}
	mark, gcRun, idle := rep.slowShares()
	// 8 of the 11 slow answers (those due 495..502ms) overlapped the
	// mark phase; the 503 and 504 ones are fast and not among them.
	if mark < 0.7 || gcRun < 0.2 || idle < 0.02 || idle > 0.2 {
		t.Fatalf("slow shares: mark %.2f gc workers %.2f idle %.2f\n%s", mark, gcRun, idle, rep)
	}
	s := rep.String()
	for _, want := range []string{"slowest 1% (11 answers", "1 GC cycles", "all 1001 answers", "before the request was sent (1.6% waiting for its connection", "1 by sysmon's netpoll (after 10ms without a poll) (waited to run p50 1.90ms"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	if o := overlap(mergeSpans([]span{{5, 10}, {0, 6}, {20, 30}}), 3, 25); o != 12 {
		t.Errorf("overlap %d, want 12", o)
	}
}

// readTrace reads a trace this Go writes: the clock snapshot, a forced GC
// cycle's mark phase and pause, the P's busy time, goroutines woken by
// one another.
func TestReadTraceOfThisProcess(t *testing.T) {
	var buf bytes.Buffer
	if err := rtrace.Start(&buf); err != nil {
		t.Skip("a trace is already running:", err)
	}
	before := time.Now()
	ch := make(chan int)
	done := make(chan struct{})
	go func() {
		for v := range ch {
			_ = v
		}
		close(done)
	}()
	for i := range 1000 {
		ch <- i
	}
	close(ch)
	<-done
	runtime.GC()
	rtrace.Stop()
	f, err := readTrace(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.mark) == 0 || len(f.stw) == 0 || len(f.busy) == 0 || len(f.waits) == 0 {
		t.Fatalf("mark %d stw %d busy %d waits %d", len(f.mark), len(f.stw), len(f.busy), len(f.waits))
	}
	// On the wall clock: within the test's own time.
	if f.from < before.Add(-time.Second).UnixNano() || f.to > time.Now().UnixNano() || f.mark[0].from < f.from {
		t.Fatalf("trace from %v to %v, mark at %v, test began %v", time.Unix(0, f.from), time.Unix(0, f.to), time.Unix(0, f.mark[0].from), before)
	}
	woken := 0
	for _, w := range f.waits {
		if w.by == wakeGoroutine {
			woken++
		}
	}
	if woken == 0 {
		t.Fatal("no goroutine woken by another")
	}
}

// slowShares are the slow group's figures as shares: of its answers that
// overlapped a mark phase, and of its waiting time the GC workers' and
// the idle P's.
func (r traceReport) slowShares() (mark, gcRun, idle float64) {
	s := r.slow
	if s.n == 0 || s.latency == 0 {
		return 0, 0, 0
	}
	return float64(s.mark) / float64(s.n), float64(s.gcRun) / float64(s.latency), float64(s.idle) / float64(s.latency)
}
