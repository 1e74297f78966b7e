package main

import (
	"bytes"
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
		{Scenario: "hit-activity20", Server: kindTradergate, RPS: 45000, Upstream: 0},
		{Scenario: "hit-activity20", Server: kindCeiling, RPS: 50000, Upstream: -1},
		{Scenario: "hit-activity20", Server: kindNginx, RPS: 40000, Upstream: 10},
		{Scenario: "hit-activity20-redis", Base: "hit-activity20", Server: kindTradergate, Label: "tradergate+redis", RPS: 20000},
		{Scenario: "stampede", Server: kindTradergate, RPS: 900, UpstreamPerRound: []int64{1, 1}},
		{Scenario: "miss", Server: kindNginx, Skipped: "nginx is not installed"},
	}
	computeRatios(rows)
	if rows[0].VsCeiling != 0.9 || rows[0].VsNginx != 1.125 || rows[3].VsCeiling != 0.4 || rows[4].VsCeiling != 0 {
		t.Fatalf("ratios: %v %v %v %v", rows[0].VsCeiling, rows[0].VsNginx, rows[3].VsCeiling, rows[4].VsCeiling)
	}
	c := rows[0].cells()
	if got := strings.Join(c, "|"); got != "hit-activity20|tradergate|45000|—|—|0.0|0.0|0%|0|0|0.90|1.12" {
		t.Fatalf("cells %q", got)
	}
	if c := rows[1].cells(); c[8] != "—" || c[10] != "1.00" {
		t.Fatalf("ceiling cells %q", c)
	}
	if c := rows[4].cells(); c[2] != "—" {
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
		{Scenario: "hit-activity20", Server: kindTradergate, RPS: 45000, Requests: 1},
		{Scenario: "hit-activity20", Server: kindCeiling, RPS: 48000, Requests: 1},
		{Scenario: "hit-activity20", Server: kindCeilingHeaders, RPS: 46000, Requests: 1},
		{Scenario: "hit-activity20", Server: kindNginx, RPS: 50000, Requests: 1},
		{Scenario: "miss", Server: kindTradergate, CPUus: 100, Requests: 1},
		{Scenario: "miss", Server: kindPassthrough, CPUus: 90, Requests: 1},
		{Scenario: "miss-full", Server: kindTradergate, CPUus: 130, Requests: 1},
		{Scenario: "miss-full", Server: kindPassthrough, CPUus: 100, Requests: 1},
		{Scenario: "stampede", Server: kindTradergate, Requests: 1, UpstreamPerRound: []int64{1, 1}, RoundsWanted: 2},
	}
	var got []string
	vs := checkTargets(rows)
	for _, v := range vs {
		got = append(got, v.Status)
	}
	// nginx 50000 > 45000; 45000 >= 0.9 × 48000 (the plain ceiling, not
	// the one sending tradergate's headers); 100 <= 1.2 × 90 on the
	// filling cache, 130 > 1.2 × 100 on the full one; one call per round;
	// normalization is not a load figure.
	if want := "FAIL PASS PASS FAIL PASS n/a"; strings.Join(got, " ") != want {
		t.Fatalf("verdicts %v, want %s", got, want)
	}
	if want := "same headers: 45000 vs 46000 (×0.98)"; !strings.Contains(vs[1].Detail, want) {
		t.Errorf("ceiling verdict %q lacks %q", vs[1].Detail, want)
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
		{Scenario: "hit-tx", Server: kindNginx, RPS: 30000},
		{Scenario: "hit-tx", Server: kindNginx, Failed: "start: boom"},
		{Scenario: "hit-tx", Server: kindNginx, RPS: 10000},
		{Scenario: "hit-tx", Server: kindNginx, RPS: 20000},
	}
	got := combine(reps)
	notes := strings.Join(got.allNotes(), "; ")
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
	if v := checkTargets([]row{got})[4]; v.Status != "FAIL" {
		t.Fatalf("stampede target %+v", v)
	}

	only := []row{{Scenario: "miss", Server: kindNginx, Skipped: "interrupted"}}
	if got := combine(only); got.Skipped != "interrupted" {
		t.Fatalf("all skipped: %+v", got)
	}
}
