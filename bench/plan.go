package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"tradergate/bench/load"
)

// plan lists the rows to run: every selected scenario on every one of its
// servers, marking those that cannot run here as skipped.
func (b *bench) plan(scs []*scenario) []row {
	var rows []row
	for _, sc := range scs {
		for _, k := range sc.servers {
			if len(b.opt.servers) > 0 && !slices.Contains(b.opt.servers, k) {
				continue
			}
			r := row{Scenario: sc.name, Base: sc.base, Server: k, Upstream: -1, Stampede: sc.mode == "stampede"}
			r.Label = sc.label()
			r.Skipped = b.missingTool(sc, k)
			rows = append(rows, r)
		}
	}
	return rows
}

// missingTool says what must be installed for sc to run on k, "" when
// nothing is missing. The harness never installs anything.
func (b *bench) missingTool(sc *scenario, k serverKind) string {
	switch {
	case (k == kindNginx || k == kindNginxTuned) && b.nginx == "":
		return "nginx is not installed (apt-get install nginx-light)"
	case k == kindVarnish && b.varnish == "":
		return "varnishd is not installed (apt-get install varnish)"
	case sc.proto.h2load() && b.h2load == "":
		return "h2load is not installed (apt-get install nghttp2-client)"
	case sc.redis && b.redis == "":
		return "redis-server is not installed (apt-get install redis-server)"
	case sc.mode == load.ModeIdle && b.nofile > 0 && b.nofile < uint64(sc.conns)+1024:
		return fmt.Sprintf("the open file limit (hard, %d) is below the %d connections and the files around them (ulimit -Hn)", b.nofile, sc.conns+1024)
	}
	return ""
}

// estimate is the expected wall time of the rows, for the operator.
func (b *bench) estimate(scs []*scenario, rows []row) time.Duration {
	var d time.Duration
	for _, r := range rows {
		if r.Skipped != "" {
			continue
		}
		sc := scenarioByName(scs, r.Scenario)
		if sc.mode == "stampede" {
			d += time.Duration(sc.rounds)*(sc.latency+200*time.Millisecond) + time.Second
			continue
		}
		if sc.mode == load.ModeIdle {
			// A handshake and a request per connection, at an assumed
			// 2,000 a second, then the idle time.
			d += time.Duration(sc.conns)*time.Second/2000 + idleSettle + 2*time.Second
			continue
		}
		d += b.warmupOf(sc) + b.windowOf(sc) + 1500*time.Millisecond // start, warm, stop
		// Pages stored before the window, at an assumed 4,000 misses a second
		// (a 2-CPU machine's rate, docs/BENCHMARKS.md, Scenarios).
		d += time.Duration(sc.prefill) * time.Second / 4000
		if r.Server == kindVarnish {
			d += 2 * time.Second // its VCL is compiled at start
		}
	}
	if b.opt.pprof {
		d += 2 * (b.opt.warmup + b.opt.duration + 3*time.Second)
	}
	return d
}

func scenarioByName(scs []*scenario, name string) *scenario {
	for _, sc := range scs {
		if sc.name == name {
			return sc
		}
	}
	return nil
}

// runMatrix runs every row -repeat times and combines each row's runs.
// Repetitions run the whole matrix again rather than a row several times
// in a row, so that a slow spell of a shared machine spreads over all
// servers instead of sinking one.
func (b *bench) runMatrix(ctx context.Context, chosen []*scenario, rows []row) []row {
	reps := make([][]row, len(rows))
	for rep := range b.opt.repeat {
		for i := range rows {
			if rows[i].Skipped != "" {
				continue
			}
			reps[i] = append(reps[i], b.runPlanned(ctx, chosen, rows[i], i, len(rows), rep))
		}
	}
	out := make([]row, len(rows))
	for i := range rows {
		out[i] = rows[i]
		if len(reps[i]) > 0 {
			out[i] = combine(reps[i])
		}
	}
	return out
}

// runPlanned runs one planned row once, reporting progress.
func (b *bench) runPlanned(ctx context.Context, chosen []*scenario, r row, i, n, rep int) row {
	if ctx.Err() != nil {
		r.Skipped = "interrupted"
		return r
	}
	sc := scenarioByName(chosen, r.Scenario)
	if sc.redis && b.redisSrv == nil {
		var err error
		if b.redisSrv, err = b.startRedis(ctx); err != nil {
			r.Failed = "redis-server: " + err.Error()
			return r
		}
	}
	tag := ""
	if b.opt.repeat > 1 {
		tag = fmt.Sprintf(" (run %d/%d)", rep+1, b.opt.repeat)
	}
	fmt.Fprintf(b.stderr, "[%d/%d]%s %s on %s… ", i+1, n, tag, r.Scenario, r.name())
	r = b.runRow(ctx, sc, r.Server)
	// The fixed-rate rows take their shares of the first closed-loop rate
	// the run measured on their row: every repetition then runs the same
	// schedule, and its figures are comparable with the others'. Later
	// repetitions of the closed-loop row are reported beside it.
	if sc.latencyGroup != "" && sc.rate == nil && r.Failed == "" && r.Server == kindNginx && b.maxRates[sc.name] == 0 {
		b.maxRates[sc.name] = r.RPS
	}
	if r.Failed != "" {
		fmt.Fprintln(b.stderr, "FAILED:", firstLine(r.Failed))
	} else {
		fmt.Fprintf(b.stderr, "%.0f req/s, p99 %s, %.1f CPU µs/req, upstream %d\n", r.RPS, fmtLatency(r.P99us), r.CPUus, r.Upstream)
	}
	return r
}
