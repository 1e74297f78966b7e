package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"tradergate/bench/fixture"
	"tradergate/bench/load"
)

// The latency rows: a cache hit sent on a fixed schedule (open loop,
// load.Spec.Rate), at shares of the rate nginx reached on the same page
// and protocol in a closed loop just before, each answer timed from when
// its request was due. The closed-loop rows' p99 shows how often a server
// pauses, not how long a user waits behind the pause (load/openloop.go);
// these rows show that, at loads below saturation where a server is
// meant to run.

// latencyShares are the fixed rates of the latency rows, as shares of
// nginx's closed-loop rate on the same row.
var latencyShares = []float64{0.25, 0.50, 0.75}

// Bounds of the latency targets: the edge's p99 and p99.9 over nginx's,
// at the shares below 0.75 and at 0.75.
const (
	latencyBoundLow  = 1.0
	latencyBoundHigh = 1.5
)

// latencyWindow and latencyMaxWindow are the measured time of a fixed-rate
// row and of the closed-loop row that sets its rate (shorter, when
// -duration is).
const (
	latencyWindow    = 5 * time.Second
	latencyMaxWindow = 3 * time.Second
)

// latencyGroup is one protocol of the latency rows.
type latencyGroup struct {
	name  string // scenario name prefix: latency-<name>-...
	proto proto
	about string
	// judged: the group's rows have PASS/FAIL lines; else info.
	judged  bool
	servers []serverKind
}

func latencyGroups() []latencyGroup {
	tlsServers := []serverKind{kindTradergate, kindNginx, kindNginxTuned}
	return []latencyGroup{
		{"h1", protoHTTP, "plain HTTP/1.1, 32 keep-alive connections", true, []serverKind{kindTradergate, kindNginx, kindNginxTuned, kindVarnish}},
		{"tls-h1", protoGoH1TLS, "HTTPS/1.1, 32 keep-alive connections", false, tlsServers},
		{"tls-h2", protoGoH2, "HTTP/2 over TLS, 32 connections of up to 10 streams", true, tlsServers},
	}
}

// fixedRate is a latency row's schedule: share × the req/s nginx reached
// on base, the group's closed-loop row, the first time the run measured
// it.
type fixedRate struct {
	base  string
	share float64
}

// latencyPage finds the hit page of the latency rows by its hit row's
// name without "hit-" (activity20-gzip, tx...).
func latencyPage(f fixture.Fixtures, name string) (url string, gzip bool, err error) {
	base, gz := strings.CutSuffix(name, "-gzip")
	var names []string
	for _, p := range hitPages(f) {
		if p.name == base {
			return p.url, gz, nil
		}
		names = append(names, p.name, p.name+"-gzip")
	}
	return "", false, fmt.Errorf("-latency-page %q: want one of %s", name, strings.Join(names, ", "))
}

// latencyScenarios are the latency rows of page (latencyPage): for each
// protocol, nginx's closed-loop row (latency-<group>-max), then each
// share's fixed-rate rows on every server of the group, back to back.
func latencyScenarios(f fixture.Fixtures, page string) []*scenario {
	url, gzip, err := latencyPage(f, page)
	if err != nil {
		return nil // parseFlags has refused it
	}
	var out []*scenario
	for _, g := range latencyGroups() {
		maxName := "latency-" + g.name + "-max"
		out = append(out, &scenario{
			name: maxName, about: "closed loop on nginx, hit-" + page + " over " + g.about + ": the rate the fixed-rate rows are shares of",
			mode: load.ModeList, urls: []string{url}, gzip: gzip, hit: true, proto: g.proto, window: latencyMaxWindow,
			servers: []serverKind{kindNginx}, latencyGroup: g.name,
		})
		for _, share := range latencyShares {
			pct := strconv.Itoa(int(math.Round(share * 100)))
			out = append(out, &scenario{
				name: "latency-" + g.name + "-" + pct, base: maxName,
				about: "hit-" + page + " over " + g.about + ", open loop at " + pct + "% of nginx's closed-loop rate, latency from each request's due time",
				mode:  load.ModeList, urls: []string{url}, gzip: gzip, hit: true, proto: g.proto, window: latencyWindow,
				servers: g.servers, latencyGroup: g.name, rate: &fixedRate{base: maxName, share: share},
			})
		}
	}
	return out
}

// latencyRate is the schedule of a fixed-rate row, from the latest run of
// its group's closed-loop row; an error when that row has no figure.
func (b *bench) latencyRate(sc *scenario) (float64, error) {
	maxRPS := b.maxRates[sc.rate.base]
	if maxRPS <= 0 {
		return 0, fmt.Errorf("no rate to take a share of: the nginx row of %s has no figure yet (is nginx installed, and in -servers and -only?)", sc.rate.base)
	}
	return sc.rate.share * maxRPS, nil
}

// Go runtime series the latency rows read off tradergate's /metrics at the
// window's edges: where a slow answer may have waited. client_golang
// exports a runtime/metrics histogram as a Prometheus histogram; the
// scheduler's only when the edge's Go collector has the rule for /sched/
// (collectors.MetricsScheduler), the GC pauses with its rule for /gc/.
const (
	metricSchedLatency = "go_sched_latencies_seconds"
	metricGCPauseHist  = "go_gc_pauses_seconds"
	metricSTWGC        = "go_sched_pauses_total_gc_seconds"
	metricSTWOther     = "go_sched_pauses_total_other_seconds"
	metricGCCycles     = "go_gc_cycles_total_gc_cycles_total"
	metricGCAssist     = "go_cpu_classes_gc_mark_assist_cpu_seconds_total"
	metricGCDedicated  = "go_cpu_classes_gc_mark_dedicated_cpu_seconds_total"
	metricGCIdle       = "go_cpu_classes_gc_mark_idle_cpu_seconds_total"
	metricGCPauseCPU   = "go_cpu_classes_gc_pause_cpu_seconds_total"
)

func latencyHistograms() []string {
	return []string{metricSchedLatency, metricGCPauseHist, metricSTWGC, metricSTWOther}
}

func latencyMetrics() []string {
	return []string{metricGCCycles, metricGCAssist, metricGCDedicated, metricGCIdle, metricGCPauseCPU, metricGCCPU}
}

// runtimeNote says what the edge's runtime did over a latency row's
// window: GC cycles and their CPU by kind, and the quantiles of its
// scheduling latencies and stop-the-world pauses, at the exported
// buckets' resolution: client_golang keeps about one runtime bucket per
// power of ten, so a quantile here is the bound of its decade.
func runtimeNote(res *load.Result) string {
	if res.MetricsAfter == nil || res.MetricsBefore == nil {
		return ""
	}
	delta := func(name string) (float64, bool) {
		a, ok1 := res.MetricsAfter[name]
		b, ok2 := res.MetricsBefore[name]
		return a - b, ok1 && ok2
	}
	var parts []string
	if n, ok := delta(metricGCCycles); ok {
		secs := res.Window.Seconds()
		p := fmt.Sprintf("runtime: %.0f GC cycles (%.1f/s)", n, n/secs)
		var cpu []string
		for _, m := range []struct{ name, what string }{{metricGCCPU, "GC"}, {metricGCAssist, "assists"}, {metricGCDedicated, "dedicated"}, {metricGCIdle, "idle"}, {metricGCPauseCPU, "pauses"}} {
			if v, ok := delta(m.name); ok {
				cpu = append(cpu, fmt.Sprintf("%s %.2f%%", m.what, 100*v/secs))
			}
		}
		if len(cpu) > 0 {
			p += ", CPU share " + strings.Join(cpu, ", ")
		}
		parts = append(parts, p)
	}
	for _, h := range []struct{ name, what string }{{metricSchedLatency, "scheduling latency"}, {metricSTWGC, "GC stop-the-world"}, {metricGCPauseHist, "GC pauses"}, {metricSTWOther, "other stop-the-world"}} {
		d := res.Histograms[h.name]
		if len(d) == 0 || d[len(d)-1].Count == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %.0f, p50 ≤ %s, p99 ≤ %s, p99.9 ≤ %s, max ≤ %s", h.what, d[len(d)-1].Count,
			fmtSeconds(load.BucketQuantile(d, 0.5)), fmtSeconds(load.BucketQuantile(d, 0.99)), fmtSeconds(load.BucketQuantile(d, 0.999)), fmtSeconds(load.BucketQuantile(d, 1))))
	}
	if _, ok := res.Histograms[metricSchedLatency]; !ok {
		parts = append(parts, "scheduling latencies not exported (the Go collector has no /sched/ rule)")
	}
	return strings.Join(parts, "; ")
}

// fmtSeconds writes a bucket bound in seconds as a latency.
func fmtSeconds(s float64) string {
	if s >= load.InfBound {
		return "∞"
	}
	return fmtLatency(s * 1e6)
}

// latencyNotes are a latency row's own notes: the schedule kept, what the
// load generator could not send, its own lateness.
func (r *row) latencyNotes(res *load.Result) {
	r.P999us, r.MaxUs, r.Rate = micros(res.Latency.P999), micros(res.Latency.Max), res.Rate
	if res.Rate <= 0 {
		return
	}
	r.ServedP99us, r.ServedP999us = micros(res.Served.P99), micros(res.Served.P999)
	r.Notes = append(r.Notes, fmt.Sprintf("open loop at %.0f req/s: p99.9 %s, max %s; load generator late by p99 %s, max %s on free connections",
		res.Rate, fmtLatency(r.P999us), fmtLatency(r.MaxUs), fmtLatency(micros(res.Lag.P99)), fmtLatency(micros(res.Lag.Max))))
	if res.Unsent > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("BEHIND SCHEDULE: %d requests of the window never sent", res.Unsent))
	}
	if res.RPS < 0.98*res.Rate {
		r.Notes = append(r.Notes, fmt.Sprintf("answered %.0f req/s of the %.0f scheduled", res.RPS, res.Rate))
	}
}

// latencyVerdicts are the latency targets: in each judged group, at each
// share, the edge's p99 and p99.9 at most nginx's (1.5 × at 75%); the
// HTTPS/1.1 group reported. With -repeat, the ratio is the median of each
// repetition's own (the rows ran back to back), as for CPU.
func latencyVerdicts(rows []row) []verdict {
	var out []verdict
	for _, g := range latencyGroups() {
		for _, share := range latencyShares {
			pct := strconv.Itoa(int(math.Round(share * 100)))
			sc := "latency-" + g.name + "-" + pct
			bound := latencyBoundLow
			if share >= 0.75 {
				bound = latencyBoundHigh
			}
			out = append(out, latencyVerdict(rows, sc, g, pct, bound))
		}
	}
	return out
}

func latencyVerdict(rows []row, sc string, g latencyGroup, pct string, bound float64) verdict {
	cmpWord := "at most nginx's"
	if bound != 1 {
		cmpWord = fmt.Sprintf("at most %g × nginx's", bound)
	}
	v := verdict{Target: fmt.Sprintf("latency at %s%% of nginx's rate (%s, %s): tradergate p99 and p99.9 %s", pct, sc, g.about, cmpWord), Status: "n/a",
		Detail: "needs the tradergate and nginx rows of " + sc}
	if !g.judged {
		v.Target = fmt.Sprintf("latency at %s%% of nginx's rate (%s, %s): tradergate p99 and p99.9 against nginx's, reported", pct, sc, g.about)
	}
	t, n := findRow(rows, sc, kindTradergate, ""), findRow(rows, sc, kindNginx, "")
	if t == nil || n == nil || t.P99us <= 0 || n.P99us <= 0 || t.P999us <= 0 || n.P999us <= 0 {
		return v
	}
	r99, t99 := compareLatency(t.RunP99us, n.RunP99us, t.P99us, n.P99us)
	r999, t999 := compareLatency(t.RunP999us, n.RunP999us, t.P999us, n.P999us)
	v.Detail = fmt.Sprintf("at %.0f req/s: p99 %s; p99.9 %s", t.Rate, t99, t999)
	if t.ServedP99us > 0 && n.ServedP99us > 0 && t.ServedP999us > 0 && n.ServedP999us > 0 {
		// Reported beside the verdict, which keeps timing from the due
		// time: what is left when the load generator's own lateness,
		// alike for every server, is taken out.
		_, s99 := compareLatency(t.RunServedP99us, n.RunServedP99us, t.ServedP99us, n.ServedP99us)
		_, s999 := compareLatency(t.RunServedP999us, n.RunServedP999us, t.ServedP999us, n.ServedP999us)
		v.Detail += fmt.Sprintf("; without the load generator's own lateness, p99 %s; p99.9 %s", s99, s999)
	}
	for _, k := range []serverKind{kindNginxTuned, kindVarnish} {
		if o := findRow(rows, sc, k, ""); o != nil {
			v.Detail += fmt.Sprintf("; %s p99 %s, p99.9 %s", k, fmtLatency(o.P99us), fmtLatency(o.P999us))
		}
	}
	if t.Unsent() > 0 || n.Unsent() > 0 {
		v.Detail += "; a server fell behind the schedule (see its row)"
	}
	if !g.judged {
		v.Status = "info"
		return v
	}
	v.Status = passIf(r99 <= bound && r999 <= bound)
	return v
}

// compareLatency returns t's latency over n's and how it reads: with
// runs of both (-repeat), the median of the runs' own ratios.
func compareLatency(tRuns, nRuns []float64, t, n float64) (float64, string) {
	ratio := t / n
	text := fmt.Sprintf("%s vs nginx %s (×%.2f)", fmtLatency(t), fmtLatency(n), ratio)
	if len(tRuns) > 1 && len(tRuns) == len(nRuns) {
		var runs []float64
		for i := range tRuns {
			if tRuns[i] > 0 && nRuns[i] > 0 {
				runs = append(runs, tRuns[i]/nRuns[i])
			}
		}
		if len(runs) > 1 {
			ratio = median(runs)
			text += fmt.Sprintf(", run by run %s: median ×%.2f", fmtRatios(runs), ratio)
		}
	}
	return ratio, text
}

// Unsent is how many of the row's scheduled requests were never sent.
func (r *row) Unsent() int64 {
	if r.Result == nil {
		return 0
	}
	return r.Result.Unsent
}

// writeLatencyTable prints the latency rows as a table of their own:
// per group and share, each server's percentiles and the edge's ratio to
// nginx.
func writeLatencyTable(w io.Writer, rows []row) error {
	var lat []*row
	for i := range rows {
		if strings.HasPrefix(rows[i].Scenario, "latency-") && rows[i].Rate > 0 {
			lat = append(lat, &rows[i])
		}
	}
	if len(lat) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nFixed-rate latency (open loop; each answer timed from when its request was due; served: without the load generator's own lateness):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(latencyHeader(), "\t")+"\t")
	for _, r := range lat {
		fmt.Fprintln(tw, strings.Join(latencyCells(r, rows), "\t")+"\t")
	}
	return tw.Flush()
}

func latencyHeader() []string {
	return []string{"row", "server", "rate", "answered", "p50", "p99", "p99.9", "max", "p99 ×nginx", "p99.9 ×nginx", "served p99", "served p99.9"}
}

func latencyCells(r *row, rows []row) []string {
	ratio := func(x, y float64) string {
		if r.Server == kindNginx || x <= 0 || y <= 0 {
			return "—"
		}
		return fmtRatio(x / y)
	}
	c := []string{r.Scenario, r.name(), strconv.FormatFloat(r.Rate, 'f', 0, 64), strconv.FormatFloat(r.RPS, 'f', 0, 64),
		fmtLatency(r.P50us), fmtLatency(r.P99us), fmtLatency(r.P999us), fmtLatency(r.MaxUs), "—", "—",
		fmtLatency(r.ServedP99us), fmtLatency(r.ServedP999us)}
	if n := findRow(rows, r.Scenario, kindNginx, ""); n != nil {
		c[8], c[9] = ratio(r.P99us, n.P99us), ratio(r.P999us, n.P999us)
	}
	return c
}

// writeMarkdownLatency writes the latency table as Markdown.
func writeMarkdownLatency(w io.Writer, rows []row) {
	var lat []*row
	for i := range rows {
		if strings.HasPrefix(rows[i].Scenario, "latency-") && rows[i].Rate > 0 {
			lat = append(lat, &rows[i])
		}
	}
	if len(lat) == 0 {
		return
	}
	h := latencyHeader()
	fmt.Fprintln(w, "\n## Fixed-rate latency")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Open loop: requests sent on a schedule, each answer timed from when its request was due. Served: the same without the load generator's own lateness (how late it sent a request whose connection was free), which every server's figures hold alike.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| "+strings.Join(h, " | ")+" |")
	fmt.Fprintln(w, "|---|---|"+strings.Repeat("---:|", len(h)-2))
	for _, r := range lat {
		fmt.Fprintln(w, "| "+strings.Join(latencyCells(r, rows), " | ")+" |")
	}
}

// latencyRuns keeps each repetition's p99 and p99.9 on the combined row,
// in the order they ran, as RunCPUus keeps the CPU figures.
func latencyRuns(out *row, reps []row) {
	if !slices.ContainsFunc(reps, func(r row) bool { return r.Rate > 0 }) {
		return
	}
	out.RunP99us, out.RunP999us = make([]float64, len(reps)), make([]float64, len(reps))
	out.RunServedP99us, out.RunServedP999us = make([]float64, len(reps)), make([]float64, len(reps))
	for i, r := range reps {
		if r.Failed == "" && r.Skipped == "" {
			out.RunP99us[i], out.RunP999us[i] = r.P99us, r.P999us
			out.RunServedP99us[i], out.RunServedP999us[i] = r.ServedP99us, r.ServedP999us
		}
	}
}
