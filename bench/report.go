package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"tradergate/bench/load"
)

// row is one line of the table: one scenario on one server.
type row struct {
	Scenario string     `json:"scenario"`
	Base     string     `json:"base,omitempty"` // scenario whose ceiling/nginx rows the ratios use
	Server   serverKind `json:"server"`
	Label    string     `json:"label,omitempty"` // shown instead of Server
	// Failed says why the row has no figures; Skipped why it did not run.
	Failed  string `json:"failed,omitempty"`
	Skipped string `json:"skipped,omitempty"`

	RPS   float64 `json:"rps"`
	P50us float64 `json:"p50_us"`
	P99us float64 `json:"p99_us"`
	// P999us and MaxUs are the 99.9th percentile and the largest latency;
	// Rate is a fixed-rate row's schedule, req/s (latency.go), and
	// RunP99us, RunP999us each repetition's figures, as RunCPUus.
	P999us    float64   `json:"p999_us,omitempty"`
	MaxUs     float64   `json:"max_us,omitempty"`
	Rate      float64   `json:"rate,omitempty"`
	RunP99us  []float64 `json:"p99_us_runs,omitempty"`
	RunP999us []float64 `json:"p999_us_runs,omitempty"`
	// ServedP99us and ServedP999us are a fixed-rate row's p99 and p99.9
	// without the load generator's own lateness (load.Result.Served),
	// and RunServed... each repetition's.
	ServedP99us     float64   `json:"served_p99_us,omitempty"`
	ServedP999us    float64   `json:"served_p999_us,omitempty"`
	RunServedP99us  []float64 `json:"served_p99_us_runs,omitempty"`
	RunServedP999us []float64 `json:"served_p999_us_runs,omitempty"`
	Requests        int64     `json:"requests"`
	Errors          int64     `json:"errors"`
	// CPUus is server CPU microseconds per request: busy ticks of the
	// pinned server CPU in /proc/stat over the window, per request.
	CPUus float64 `json:"cpu_us_per_req"`
	// ProcCPUus is the same from the server's process group's own ticks,
	// which leave out softirq work and other processes on that CPU.
	ProcCPUus float64 `json:"proc_cpu_us_per_req"`
	// ServerBusy and LoadBusy are the fractions of the window the server's
	// and the load generator's CPUs were busy.
	ServerBusy float64 `json:"server_cpu_busy"`
	LoadBusy   float64 `json:"load_cpu_busy"`
	// Upstream is the requests that reached the legacy host in the window;
	// -1 when not counted (the ceiling, the host itself).
	Upstream         int64   `json:"upstream_calls"`
	UpstreamPerRound []int64 `json:"upstream_calls_per_round,omitempty"`
	BytesPerResp     float64 `json:"bytes_per_response"`
	// RSSBytes and PeakRSSBytes are the server's resident memory at the
	// window's end and its peak so far (VmRSS, VmHWM; process group).
	RSSBytes     uint64 `json:"rss_bytes,omitempty"`
	PeakRSSBytes uint64 `json:"peak_rss_bytes,omitempty"`
	// FaultsPerReq is the server's minor page faults per request: pages
	// it touched for the first time. A process whose heap grows (a cache
	// filling) pays one per 4 KiB page, and on some VMs each costs more
	// than the rest of a miss (docs/BENCHMARKS.md, Scenarios).
	FaultsPerReq float64 `json:"minor_faults_per_req,omitempty"`
	// GCCPU is the Go GC's CPU time over the window's wall time (the
	// server has one core); GCSource the metric it came from (memory.go):
	// "runtime", or "pauses" for stop-the-world pauses alone.
	GCCPU    float64 `json:"gc_cpu_fraction,omitempty"`
	GCSource string  `json:"gc_source,omitempty"`
	// MemLimit is go_gc_gomemlimit_bytes at the window's end.
	MemLimit float64 `json:"go_memory_limit_bytes,omitempty"`
	// CacheMaxBytes is tradergate's cache.max_bytes in this row; CacheHeld
	// what it held at the window's end and Evictions how many entries it
	// evicted during the window.
	CacheMaxBytes int64   `json:"cache_max_bytes,omitempty"`
	CacheHeld     float64 `json:"cache_held_bytes,omitempty"`
	Evictions     int64   `json:"cache_evictions,omitempty"`
	// PageFiles is how many page files tradergate's cache held at the
	// window's end: on a one-page hit row, whether its answer went out of
	// a page file or from the heap. nil when not read.
	PageFiles *int64 `json:"cache_page_files,omitempty"`
	// VsCeiling and VsNginx are RPS over the same scenario's ceiling and
	// nginx rows; 0 when there is none.
	// Stampede and Zipf rows get a derived note (the per-round verdict,
	// the upstream ratio), computed when rendered so that combined
	// repetitions stay consistent.
	Stampede bool `json:"-"`
	Zipf     bool `json:"-"`
	// RoundsWanted is the stampede rounds run, to tell a round whose
	// counter could not be read from one that was not run.
	RoundsWanted int `json:"-"`
	// Runs is how many repetitions the row combines (-repeat), and
	// RunCPUus each repetition's CPUus in the order they ran (0 for a run
	// that failed): the targets compare servers run by run
	// (pairedRatios).
	Runs     int       `json:"runs,omitempty"`
	RunCPUus []float64 `json:"cpu_us_per_req_runs,omitempty"`
	// RedisPerReq is the Redis commands the server sent per response in
	// the window (fleet rows); RedisCalls splits them by command, and is
	// nil when they were not read.
	RedisPerReq float64          `json:"redis_commands_per_req,omitempty"`
	RedisCalls  map[string]int64 `json:"redis_calls,omitempty"`
	// Handshakes and Resumed are the TLS handshakes of a new-connection
	// row's window and how many of them resumed a session.
	Handshakes int64 `json:"tls_handshakes,omitempty"`
	Resumed    int64 `json:"tls_resumed,omitempty"`
	// IdleConns are an idle row's connections, open and idle when the
	// server's RSS was read, and IdlePerConn its RSS growth per
	// connection, in bytes.
	IdleConns   int64        `json:"idle_connections,omitempty"`
	IdlePerConn float64      `json:"idle_rss_bytes_per_connection,omitempty"`
	VsCeiling   float64      `json:"vs_ceiling,omitempty"`
	VsNginx     float64      `json:"vs_nginx,omitempty"`
	Notes       []string     `json:"notes,omitempty"`
	Result      *load.Result `json:"raw,omitempty"`
}

func (r *row) name() string {
	if r.Label != "" {
		return r.Label
	}
	return string(r.Server)
}

// fill derives the row's figures from a load result; hz is USER_HZ.
func (r *row) fill(sc *scenario, res *load.Result, hz int) {
	r.Result = res
	r.RPS, r.Requests, r.Errors = res.RPS, res.Requests, res.Errors
	r.P50us, r.P99us = micros(res.Latency.P50), micros(res.Latency.P99)
	r.latencyNotes(res)
	if n := runtimeNote(res); n != "" && sc.latencyGroup != "" {
		r.Notes = append(r.Notes, n)
	}
	if res.Requests > 0 {
		r.BytesPerResp = float64(res.BodyBytes) / float64(res.Requests)
		perReq := 1e6 / float64(hz) / float64(res.Requests)
		if res.CPUMeasured {
			r.CPUus = float64(res.ServerCPU.Busy()) * perReq
		}
		if res.ProcMeasured {
			r.ProcCPUus = float64(res.ServerProcJiffies) * perReq
			r.FaultsPerReq = float64(res.ServerMinorFaults) / float64(res.Requests)
		}
	}
	if res.CPUMeasured {
		r.ServerBusy = fraction(res.ServerCPU.Busy(), res.ServerCPU.Total())
		r.LoadBusy = fraction(res.LoadCPU.Busy(), res.LoadCPU.Total())
	}
	if f := foreignShare(res); f > 0.1 {
		r.Notes = append(r.Notes, fmt.Sprintf("%.0f%% of the server CPU's busy time was neither the server nor interrupts (other processes on a shared machine): its own time is the proc column", 100*f))
	}
	if res.UpstreamMeasured {
		r.Upstream = res.Upstream
	}
	if res.RSSMeasured {
		r.RSSBytes, r.PeakRSSBytes = res.ServerRSS, res.ServerPeakRSS
	}
	if res.IdleConns > 0 && res.RSSMeasured {
		r.IdleConns = res.IdleConns
		r.IdlePerConn = (float64(res.ServerRSS) - float64(res.IdleRSSBefore)) / float64(res.IdleConns)
		r.Notes = append(r.Notes, fmt.Sprintf("%d idle connections: RSS %s before the first opened, %s with all of them idle: %s per connection",
			res.IdleConns, fmtMiB(float64(res.IdleRSSBefore)), fmtMiB(float64(res.ServerRSS)), fmtKB(r.IdlePerConn)))
		if n := idleNote(res); n != "" {
			r.Notes = append(r.Notes, n)
		}
	}
	if sc.mode != load.ModeIdle {
		r.gcFigures(res)
	}
	if sc.mode != load.ModeList && sc.mode != load.ModeStampede && sc.mode != load.ModeIdle {
		// Rows that store pages: what the heap and the collector do.
		if n := r.memoryNote(); n != "" {
			r.Notes = append(r.Notes, n)
		}
	}
	r.UpstreamPerRound = res.UpstreamPerRound

	if r.Errors > 0 {
		r.Notes = append(r.Notes, "errors: "+statusSummary(res))
	}
	r.protocolNotes(sc, res)
	if res.CacheUnexpected > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("NOT ALL HITS: %d of %d sampled answers were not X-Cache: HIT", res.CacheUnexpected, res.CacheSampled))
	} else if sc.hit && r.Server == kindTradergate && res.CacheSampled > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("X-Cache: HIT on all %d sampled answers", res.CacheSampled))
	} else if s := cacheSummary(res.Cache); s != "" && sc.mode != load.ModeStampede {
		r.Notes = append(r.Notes, "X-Cache sampled: "+s)
	}
	r.Stampede = sc.mode == load.ModeStampede
	r.Zipf = sc.mode == load.ModeZipf
	if r.Stampede {
		r.RoundsWanted = sc.rounds
	}
	if sc.mode != load.ModeStampede && sc.mode != load.ModeIdle && res.CPUMeasured {
		// A fixed-rate row is below saturation on purpose.
		if r.ServerBusy < 0.9 && res.Rate <= 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("server CPU only %.0f%% busy: not saturated", 100*r.ServerBusy))
		}
		if r.LoadBusy > 0.97 {
			// The load CPU also runs the shared legacysim, busy on misses.
			r.Notes = append(r.Notes, fmt.Sprintf("load CPU %.0f%% busy", 100*r.LoadBusy))
		}
	}
	r.Notes = append(r.Notes, res.Problems...)
}

// protocolNotes adds what the TLS and fleet rows measure beyond the
// common figures: h2load's protocol and mean latency, the handshakes and
// how many resumed, the Redis commands per response.
func (r *row) protocolNotes(sc *scenario, res *load.Result) {
	if sc.proto.h2load() {
		r.Notes = append(r.Notes, fmt.Sprintf("h2load over %s: mean %s, max %s per request (no percentiles); X-Cache not read (the warm-up made the page a hit)",
			cmp.Or(res.Protocol, "?"), fmtLatency(micros(res.Latency.Mean)), fmtLatency(micros(res.Latency.Max))))
		if want := map[proto]string{protoH2: "h2", protoH1TLS: "http/1.1"}[sc.proto]; res.Protocol != want {
			r.Notes = append(r.Notes, fmt.Sprintf("PROTOCOL: h2load negotiated %q, not %q", res.Protocol, want))
		}
	}
	if sc.proto == protoNewConn || sc.proto == protoResumed {
		r.Handshakes, r.Resumed = res.Handshakes, res.Resumed
		r.Notes = append(r.Notes, fmt.Sprintf("%d TLS handshakes in the window, %d resumed (%.1f%%)", res.Handshakes, res.Resumed, 100*fraction(uint64(res.Resumed), uint64(res.Handshakes))))
	}
	if res.RedisMeasured && res.Requests > 0 {
		var total int64
		cmds := make([]string, 0, len(res.RedisCalls))
		for c, n := range res.RedisCalls {
			total += n
			cmds = append(cmds, c)
		}
		slices.SortFunc(cmds, func(a, b string) int {
			return cmp.Or(cmp.Compare(res.RedisCalls[b], res.RedisCalls[a]), cmp.Compare(a, b))
		})
		parts := make([]string, len(cmds))
		for i, c := range cmds {
			parts[i] = fmt.Sprintf("%s %.2f", c, float64(res.RedisCalls[c])/float64(res.Requests))
		}
		r.RedisPerReq, r.RedisCalls = float64(total)/float64(res.Requests), res.RedisCalls
		note := fmt.Sprintf("redis: %.2f commands per response", r.RedisPerReq)
		if len(parts) > 0 {
			note += " (" + strings.Join(parts, ", ") + ")"
		}
		r.Notes = append(r.Notes, note)
	}
}

// foreignShare estimates the part of the server CPU's busy ticks that
// belongs to no process of the server's group and to no interrupt work:
// other processes the scheduler put on the pinned CPU.
func foreignShare(res *load.Result) float64 {
	if !res.CPUMeasured || !res.ProcMeasured {
		return 0
	}
	busy := res.ServerCPU.Busy()
	own := res.ServerProcJiffies + res.ServerCPU.IRQ + res.ServerCPU.SoftIRQ
	if busy == 0 || own >= busy {
		return 0
	}
	return float64(busy-own) / float64(busy)
}

// stampedeVerdict states whether every cold key cost exactly one upstream
// call (the benchmark's target).
func stampedeVerdict(perRound []int64, rounds int) string {
	if len(perRound) != rounds || rounds == 0 {
		return "upstream calls per round not measured"
	}
	bad := 0
	for _, n := range perRound {
		if n != 1 {
			bad++
		}
	}
	if bad == 0 {
		return fmt.Sprintf("OK: exactly 1 upstream call per cold key in all %d rounds", rounds)
	}
	return fmt.Sprintf("FAIL: upstream calls per round %v (want 1 each)", perRound)
}

func statusSummary(res *load.Result) string {
	var parts []string
	codes := make([]int, 0, len(res.Status))
	for c := range res.Status {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	for _, c := range codes {
		if c < 200 || c > 299 {
			parts = append(parts, fmt.Sprintf("%d×%d", res.Status[c], c))
		}
	}
	if res.TransportErrors > 0 {
		parts = append(parts, fmt.Sprintf("%d transport", res.TransportErrors))
	}
	return strings.Join(parts, ", ")
}

func fraction(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// computeRatios sets every row's ratio to the fasthttp ceiling and to
// nginx on the same scenario (or its base). Stampede rows have none: their
// rate is set by the injected upstream delay.
func computeRatios(rows []row) {
	rps := map[[2]string]float64{}
	for _, r := range rows {
		if r.Failed == "" && r.Skipped == "" && r.RPS > 0 && r.Label == "" {
			rps[[2]string{r.Scenario, string(r.Server)}] = r.RPS
		}
	}
	for i := range rows {
		r := &rows[i]
		if r.Failed != "" || r.Skipped != "" || r.Scenario == "stampede" {
			continue
		}
		base := r.Scenario
		if r.Base != "" {
			base = r.Base
		}
		if c := rps[[2]string{base, string(kindCeilingFast)}]; c > 0 {
			r.VsCeiling = r.RPS / c
		}
		if n := rps[[2]string{base, string(kindNginx)}]; n > 0 {
			r.VsNginx = r.RPS / n
		}
	}
}

// tableHeader returns the columns of the printed and Markdown tables.
func tableHeader() []string {
	return []string{"scenario", "server", "req/s", "p50", "p99", "CPU µs/req", "proc µs/req", "CPU busy", "upstream", "errors", "RSS", "×ceiling", "×nginx"}
}

// cells formats a row for the tables.
func (r *row) cells() []string {
	if r.Skipped != "" || r.Failed != "" {
		why := "skipped"
		if r.Failed != "" {
			why = "FAILED"
		}
		c := make([]string, len(tableHeader()))
		c[0], c[1], c[2] = r.Scenario, r.name(), why
		return c
	}
	rps := strconv.FormatFloat(r.RPS, 'f', 0, 64)
	if r.Scenario == "stampede" {
		rps = "—"
	}
	up := "—"
	if r.Upstream >= 0 {
		up = strconv.FormatInt(r.Upstream, 10)
	}
	return []string{
		r.Scenario, r.name(), rps, fmtLatency(r.P50us), fmtLatency(r.P99us),
		strconv.FormatFloat(r.CPUus, 'f', 1, 64), strconv.FormatFloat(r.ProcCPUus, 'f', 1, 64),
		strconv.FormatFloat(100*r.ServerBusy, 'f', 0, 64) + "%",
		up, strconv.FormatInt(r.Errors, 10), fmtMiB(float64(r.RSSBytes)), fmtRatio(r.VsCeiling), fmtRatio(r.VsNginx),
	}
}

func fmtLatency(us float64) string {
	switch {
	case us <= 0:
		return "—"
	case us < 1000:
		return strconv.FormatFloat(us, 'f', 0, 64) + "µs"
	case us < 100_000:
		return strconv.FormatFloat(us/1000, 'f', 2, 64) + "ms"
	}
	return strconv.FormatFloat(us/1000, 'f', 0, 64) + "ms"
}

func fmtRatio(x float64) string {
	if x <= 0 {
		return "—"
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

// writeTable prints the table for a terminal, then each row's notes.
func writeTable(w io.Writer, rows []row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(tableHeader(), "\t")+"\t")
	for i := range rows {
		fmt.Fprintln(tw, strings.Join(rows[i].cells(), "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i := range rows {
		r := &rows[i]
		notes := r.allNotes()
		if len(notes) > 0 {
			fmt.Fprintf(w, "  %s / %s: %s\n", r.Scenario, r.name(), strings.Join(notes, "; "))
		}
	}
	return nil
}

func (r *row) allNotes() []string {
	var out []string
	if r.Skipped != "" {
		out = append(out, "skipped: "+r.Skipped)
	}
	if r.Failed != "" {
		out = append(out, "failed: "+firstLine(r.Failed))
	}
	switch {
	case r.Failed != "" || r.Skipped != "":
	case r.Stampede && r.Server == kindPassthrough:
		// Nothing to coalesce with: the row shows what a cache saves.
		out = append(out, fmt.Sprintf("no cache: upstream calls per round %v", r.UpstreamPerRound))
	case r.Stampede:
		out = append(out, stampedeVerdict(r.UpstreamPerRound, r.RoundsWanted))
	case r.Zipf && r.Upstream >= 0 && r.Requests > 0:
		out = append(out, fmt.Sprintf("upstream/requests = %.4f", float64(r.Upstream)/float64(r.Requests)))
	}
	return append(out, r.Notes...)
}

// combine makes one row of repetitions of the same row: the run with the
// median req/s (the median p50 for the stampede, whose rate is not a
// figure), with the spread noted. A stampede keeps every run's rounds, so
// its verdict covers them all.
func combine(reps []row) row {
	var ok []row
	for _, r := range reps {
		if r.Failed == "" && r.Skipped == "" {
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return reps[len(reps)-1]
	}
	key := func(r row) float64 { return r.RPS }
	if ok[0].IdleConns > 0 {
		key = func(r row) float64 { return r.IdlePerConn }
	}
	if ok[0].Stampede {
		key = func(r row) float64 { return r.P50us }
	}
	if ok[0].Rate > 0 {
		// Every run of a fixed-rate row answers its schedule: the median
		// tail is its figure.
		key = func(r row) float64 { return r.P99us }
	}
	slices.SortFunc(ok, func(a, b row) int { return cmp.Compare(key(a), key(b)) })
	out := ok[(len(ok)-1)/2]
	out.Runs = len(reps)
	out.RunCPUus = make([]float64, len(reps))
	for i, r := range reps {
		if r.Failed == "" && r.Skipped == "" {
			out.RunCPUus[i] = r.CPUus
		}
	}
	latencyRuns(&out, reps)
	if len(ok) > 1 {
		spread := fmt.Sprintf("median of %d runs (req/s %.0f–%.0f)", len(ok), ok[0].RPS, ok[len(ok)-1].RPS)
		if out.Rate > 0 {
			spread = fmt.Sprintf("median of %d runs by p99 (p99 %s–%s)", len(ok), fmtLatency(ok[0].P99us), fmtLatency(ok[len(ok)-1].P99us))
		}
		if out.Stampede {
			spread = fmt.Sprintf("median of %d runs (p50 %s–%s)", len(ok), fmtLatency(ok[0].P50us), fmtLatency(ok[len(ok)-1].P50us))
		}
		out.Notes = append(slices.Clone(out.Notes), spread)
		if out.Stampede {
			out.UpstreamPerRound, out.Upstream, out.RoundsWanted = nil, 0, 0
			for _, r := range ok {
				out.UpstreamPerRound = append(out.UpstreamPerRound, r.UpstreamPerRound...)
				out.Upstream += r.Upstream
				out.RoundsWanted += r.RoundsWanted
			}
		}
	}
	if len(ok) < len(reps) {
		out.Notes = append(out.Notes, fmt.Sprintf("%d of %d runs failed", len(reps)-len(ok), len(reps)))
	}
	return out
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// writeMarkdownTable writes the table as GitHub Markdown, notes in the
// last column.
func writeMarkdownTable(w io.Writer, rows []row) {
	h := append(tableHeader(), "notes")
	fmt.Fprintln(w, "| "+strings.Join(h, " | ")+" |")
	seps := make([]string, len(h))
	for i := range seps {
		seps[i] = "---"
		if i >= 2 && i < len(h)-1 {
			seps[i] = "---:"
		}
	}
	fmt.Fprintln(w, "|"+strings.Join(seps, "|")+"|")
	for i := range rows {
		c := append(rows[i].cells(), strings.Join(rows[i].allNotes(), "; "))
		for k := range c {
			c[k] = strings.ReplaceAll(c[k], "|", `\|`)
		}
		fmt.Fprintln(w, "| "+strings.Join(c, " | ")+" |")
	}
}
