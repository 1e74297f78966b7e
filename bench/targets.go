package main

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// verdict is where one of the benchmark's targets stands in this run.
type verdict struct {
	Target string `json:"target"`
	// Status is PASS or FAIL; n/a when the rows it needs did not run, and
	// info for a figure reported without a target.
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// Bounds of the targets.
const (
	// A hit costs at most this many times the fasthttp ceiling's CPU.
	hitVsCeiling = 1.25
	// A miss costs at most this many times the pass-through's CPU.
	missVsPassthrough = 1.2
	// A hit with the limiter's counters in Redis costs at most this many
	// times the hit with them in memory, and sends Redis at most
	// redisPerHit commands on average.
	redisHitVsLocal = 1.5
	redisPerHit     = 1.0
)

// tlsHitPages are the pages of the TLS hit rows (tls-h2-*, tls-h1-*).
func tlsHitPages() []string { return []string{"hit-tx", "hit-activity20"} }

// hitScenarios are the cache hit pages the hit targets cover, each
// measured identity and with its "-gzip" twin.
func hitScenarios() []string { return []string{"hit-tx", "hit-activity20", "hit-orderbook1000"} }

// rowFinder finds the row of a scenario on a server that has figures.
type rowFinder func(scenario string, kind serverKind) *row

func finder(rows []row) rowFinder {
	return func(scenario string, kind serverKind) *row { return findRow(rows, scenario, kind, "") }
}

// findRow finds the row of a scenario on a server, labelled label (""
// for a server in its default configuration), that has figures.
func findRow(rows []row, scenario string, kind serverKind, label string) *row {
	for i := range rows {
		r := &rows[i]
		if r.Scenario == scenario && r.Server == kind && r.Label == label && r.Failed == "" && r.Skipped == "" && r.Requests > 0 {
			return r
		}
	}
	return nil
}

// checkTargets reads the benchmark's targets off the rows of one run.
// Every comparison is within the run: the machine is shared, and only rows
// of the same run saw the same neighbours.
func checkTargets(rows []row) []verdict {
	find := finder(rows)
	var out []verdict
	for _, sc := range hitScenarios() {
		pair := []string{sc, sc + "-gzip"}
		out = append(out,
			cpuVerdict(find, "cache hit "+sc+": tradergate CPU/response < nginx proxy_cache's, identity and gzip",
				pair, kindNginx, 1, true),
			cpuVerdict(find, fmt.Sprintf("cache hit %s: tradergate CPU/response <= %g × the fasthttp ceiling's, identity and gzip", sc, hitVsCeiling),
				pair, kindCeilingFast, hitVsCeiling, false, kindCeilingHeaders))
	}
	out = append(out, firstGzipVerdict(find), bigZipfVerdict(find), pageFileVerdict(rows))

	// The miss target, twice: on a fresh process filling its cache (miss)
	// and once the cache is full (miss-full, the steady state).
	for _, m := range []struct{ sc, when string }{{"miss", "cache filling: a fresh process"}, {"miss-full", "cache full: steady state"}} {
		out = append(out, cpuVerdict(find,
			fmt.Sprintf("cache miss (%s): tradergate CPU/request <= %g × plain ReverseProxy's", m.when, missVsPassthrough),
			[]string{m.sc}, kindPassthrough, missVsPassthrough, false),
			// nginx stores the legacy body as it comes, in a file: where
			// the scratch directory is on a disk file system, that file's
			// creation is most of nginx's miss (the run's header names
			// the file system; docs/BENCHMARKS.md).
			cpuVerdict(find,
				fmt.Sprintf("cache miss (%s): tradergate CPU/request <= nginx proxy_cache's, the rewrite included", m.when),
				[]string{m.sc}, kindNginx, 1, false))
	}
	out = append(out, memoryVerdict(find))

	v := verdict{Target: "stampede: exactly one upstream call", Status: "n/a", Detail: "needs the tradergate row of stampede"}
	if s := find("stampede", kindTradergate); s != nil {
		v.Detail = stampedeVerdict(s.UpstreamPerRound, s.RoundsWanted)
		ok := len(s.UpstreamPerRound) > 0 && len(s.UpstreamPerRound) == s.RoundsWanted
		for _, n := range s.UpstreamPerRound {
			ok = ok && n == 1
		}
		v.Status = passIf(ok)
	}
	out = append(out, v)

	out = append(out, verdict{
		Target: "normalization: envelope-only >= 1 GB/s, field rewrites >= 200 MB/s per core",
		Status: "n/a",
		Detail: "not a load figure: go test -run '^$' -bench . -cpu 1 ./normalize",
	})
	out = append(out, peerVerdicts(rows)...)
	out = append(out, latencyVerdicts(rows)...)
	return append(out, sweepVerdict(rows))
}

// peerVerdicts are the targets against the peers as their users tune
// them, over TLS, and of the fleet, after the others.
func peerVerdicts(rows []row) []verdict {
	find := finder(rows)
	out := []verdict{cpuVerdict(find, fmt.Sprintf("cache hit hit-orderbook1000-gzip: tradergate CPU/response <= %g × the fasthttp ceiling's", hitVsCeiling),
		[]string{"hit-orderbook1000-gzip"}, kindCeilingFast, hitVsCeiling, false, kindCeilingHeaders)}
	// The peers as their users tune them, on every plain HTTP hit row.
	for _, sc := range hitScenarios() {
		pair := []string{sc, sc + "-gzip"}
		out = append(out,
			cpuVerdict(find, "cache hit "+sc+": tradergate CPU/response < nginx-tuned's (open_file_cache), identity and gzip", pair, kindNginxTuned, 1, true),
			cpuVerdict(find, "cache hit "+sc+": tradergate CPU/response < Varnish's, identity and gzip", pair, kindVarnish, 1, true))
	}
	out = append(out, tlsVerdicts(find)...)
	return append(out, redisHitVerdict(rows), fleetVerdict(rows), idleVerdict(rows))
}

// idleBound is the most an idle TLS connection may cost the edge: RSS
// growth per connection, in bytes (20 KB).
const idleBound = 20_000

// idleVerdict is the idle connection target: over HTTP/1.1 and HTTP/2,
// each of the idle rows' connections costs tradergate at most idleBound
// of RSS; nginx's figure beside it.
func idleVerdict(rows []row) verdict {
	v := verdict{Target: "idle TLS connection (one request, then idle): tradergate at most 20 KB RSS per connection, HTTP/1.1 and HTTP/2", Status: "n/a",
		Detail: "needs the tradergate rows of idle-h1 and idle-h2"}
	var parts []string
	ok, all := true, true
	for _, sc := range []string{"idle-h1", "idle-h2"} {
		t := findIdle(rows, sc, kindTradergate)
		if t == nil {
			all = false
			continue
		}
		ok = ok && t.IdlePerConn <= idleBound
		p := fmt.Sprintf("%s: %s per connection (%d connections)", sc, fmtKB(t.IdlePerConn), t.IdleConns)
		if n := findIdle(rows, sc, kindNginx); n != nil {
			p += fmt.Sprintf(", nginx %s (×%.1f)", fmtKB(n.IdlePerConn), t.IdlePerConn/n.IdlePerConn)
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return v
	}
	v.Detail = strings.Join(parts, "; ")
	switch {
	case !ok:
		v.Status = "FAIL"
	case all:
		v.Status = "PASS"
	}
	return v
}

// findIdle finds an idle row of kind with its figure.
func findIdle(rows []row, scenario string, kind serverKind) *row {
	if r := findRow(rows, scenario, kind, ""); r != nil && r.IdleConns > 0 {
		return r
	}
	return nil
}

// fmtKB writes a size per connection in KB, and in KiB.
func fmtKB(b float64) string {
	return fmt.Sprintf("%.1f KB (%.1f KiB)", b/1000, b/1024)
}

func passIf(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// cpuVerdict compares tradergate's CPU per request with another server's
// on each of the scenarios: tradergate < limit × other's (strict) or <=,
// run by run when the rows combine repetitions (pairedRatios).
// It fails when any measured scenario fails, passes when all were
// measured and pass, and is n/a otherwise. refs are servers shown for
// reference, not judged.
func cpuVerdict(find rowFinder, target string, scenarios []string, other serverKind, limit float64, strict bool, refs ...serverKind) verdict {
	v := verdict{Target: target}
	var parts, missing []string
	failed, measured := false, 0
	for _, sc := range scenarios {
		t, o := find(sc, kindTradergate), find(sc, other)
		if t == nil || o == nil || t.CPUus <= 0 || o.CPUus <= 0 {
			missing = append(missing, sc)
			continue
		}
		measured++
		ratio, text := compareCPU(t, o)
		p := sc + ": " + text
		if n := formNote(t); n != "" && slices.Contains(pageFileScenarios, sc) {
			p = sc + " (" + n + "): " + text
		}
		ok := ratio <= limit
		if strict {
			ok = ratio < limit
		}
		failed = failed || !ok
		// The CPU figure is the target's; on a shared machine other
		// processes inflate it, so the processes' own time is shown too.
		if t.ProcCPUus > 0 && o.ProcCPUus > 0 {
			p += fmt.Sprintf(", own time %.1f vs %.1f (×%.2f)", t.ProcCPUus, o.ProcCPUus, t.ProcCPUus/o.ProcCPUus)
		}
		for _, k := range refs {
			if r := find(sc, k); r != nil && r.CPUus > 0 {
				p += fmt.Sprintf("; %s %.1f", k, r.CPUus)
			}
		}
		parts = append(parts, p)
	}
	switch {
	case failed:
		v.Status = "FAIL"
	case measured == len(scenarios):
		v.Status = "PASS"
	default:
		v.Status = "n/a"
	}
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("needs the tradergate and %s rows of %s", other, strings.Join(missing, ", ")))
	}
	v.Detail = strings.Join(parts, "; ")
	return v
}

// compareCPU returns t's CPU per request over o's and how it reads. The
// ratio is what a verdict reads, not the figures: with -repeat, the median
// of each repetition's own ratio, whose two rows ran one after the other
// (pairedRatios); else the ratio of the two rows' figures.
func compareCPU(t, o *row) (float64, string) {
	ratio := t.CPUus / o.CPUus
	text := fmt.Sprintf("%.1f vs %.1f CPU µs (×%.2f)", t.CPUus, o.CPUus, ratio)
	if runs := pairedRatios(t, o); len(runs) > 1 {
		ratio = median(runs)
		text += fmt.Sprintf(", run by run %s: median ×%.2f", fmtRatios(runs), ratio)
	}
	return ratio, text
}

// pairedRatios returns, for each repetition both rows measured, t's CPU
// per request over o's in that repetition. The rows of one scenario run
// back to back within a repetition (runMatrix), so each ratio compares
// two servers under the same neighbours, where the median runs of two
// rows may come from repetitions minutes apart.
func pairedRatios(t, o *row) []float64 {
	if len(t.RunCPUus) != len(o.RunCPUus) {
		return nil
	}
	var out []float64
	for i, tc := range t.RunCPUus {
		if oc := o.RunCPUus[i]; tc > 0 && oc > 0 {
			out = append(out, tc/oc)
		}
	}
	return out
}

// median returns the median of xs (not empty); xs is left as it is.
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func fmtRatios(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("×%.2f", x)
	}
	return strings.Join(parts, " ")
}

// firstGzipVerdict reports what the first gzip hit of a page stored
// identity costs, next to a plain gzip hit of the same page shape.
func firstGzipVerdict(find rowFinder) verdict {
	v := verdict{Target: "first gzip hit of a page stored identity (lazy compression): CPU/response, reported", Status: "n/a", Detail: "needs the tradergate row of first-gzip-hit"}
	f := find("first-gzip-hit", kindTradergate)
	if f == nil {
		return v
	}
	v.Status = "info"
	v.Detail = fmt.Sprintf("%.1f CPU µs over %d pages (own time %.1f)", f.CPUus, f.Requests, f.ProcCPUus)
	if h := find("hit-activity20-gzip", kindTradergate); h != nil && h.CPUus > 0 {
		v.Detail += fmt.Sprintf("; a later gzip hit of that page shape (hit-activity20-gzip): %.1f, ×%.2f", h.CPUus, f.CPUus/h.CPUus)
	}
	return v
}

// bigZipfVerdict reports the hit cost over 100,000 cached pages next to
// the hit on one of them alone.
func bigZipfVerdict(find rowFinder) verdict {
	v := verdict{Target: "cache hit cost as the cache grows: 100,000 pages in a 1 GiB cache against one page, reported", Status: "n/a", Detail: "needs the tradergate rows of zipf100k and zipf100k-one"}
	z, one := find("zipf100k", kindTradergate), find("zipf100k-one", kindTradergate)
	if z == nil || one == nil || one.CPUus <= 0 {
		return v
	}
	v.Status = "info"
	v.Detail = fmt.Sprintf("%.1f vs %.1f CPU µs/hit (×%.2f), own time %.1f vs %.1f", z.CPUus, one.CPUus, z.CPUus/one.CPUus, z.ProcCPUus, one.ProcCPUus)
	if h := find("hit-activity20", kindTradergate); h != nil {
		v.Detail += fmt.Sprintf("; hit-activity20 (a 15 KB page, default cache): %.1f", h.CPUus)
	}
	if z.RSSBytes > 0 {
		v.Detail += fmt.Sprintf("; RSS with the pages stored %s", fmtMiB(float64(z.RSSBytes)))
	}
	return v
}

// pageFileVerdict reports what the order book's answers (~500 KB
// identity, 92 KB gzip) cost as the default configuration sends them
// (from a page file when at least cache.sendfile_min_bytes long) against
// the heap (their -heap rows): which is cheaper depends on the host and
// the length (docs/CONFIGURATION.md, Page files; the sweep, sweepVerdict).
func pageFileVerdict(rows []row) verdict {
	v := verdict{Target: "order book answers as the default sends them against the heap (cache.sendfile_min_bytes: -1): CPU/response, reported", Status: "n/a"}
	var parts, missing []string
	for _, sc := range pageFileScenarios {
		f, h := findRow(rows, sc, kindTradergate, ""), findRow(rows, sc+"-heap", kindTradergate, labelHeap)
		if f == nil || h == nil || f.CPUus <= 0 || h.CPUus <= 0 {
			missing = append(missing, sc)
			continue
		}
		ratio, text := compareCPU(f, h)
		p := sc + ": " + text
		switch n := formNote(f); {
		case f.PageFiles != nil && *f.PageFiles == 0:
			// Both rows wrote the page from the heap: the figures differ
			// by noise alone.
			p = sc + " (" + n + "): " + text + "; both from the heap"
		default:
			if n != "" {
				p = sc + " (" + n + "): " + text
			}
			cheaper := "the page file"
			if ratio > 1 {
				cheaper = "the heap"
			}
			p += "; cheaper in this run: " + cheaper
		}
		parts = append(parts, p)
	}
	if len(missing) > 0 {
		parts = append(parts, "needs the tradergate and "+labelHeap+" rows of "+strings.Join(missing, ", "))
	}
	if len(missing) < len(pageFileScenarios) {
		v.Status = "info"
	}
	v.Detail = strings.Join(parts, "; ")
	return v
}

// formNote says how tradergate's row sent its page, read off its cache's
// page files at the window's end; "" when they were not read.
func formNote(r *row) string {
	switch {
	case r.PageFiles == nil:
		return ""
	case *r.PageFiles > 0:
		return "sent from its page file"
	}
	return "sent from the heap"
}

// sweepVerdict reads the page size sweep (sweepScenarios): for each page
// length, what its hit cost from a page file against the heap, run by run,
// and the length from which the page file was the cheaper way at every
// length measured: the figure for cache.sendfile_min_bytes on this host.
func sweepVerdict(rows []row) verdict {
	v := verdict{Target: "page size sweep: order book hits from a page file against the heap, by length, and where the page file starts to cost less: CPU/response, reported", Status: "n/a", Detail: "needs the rows of -only " + sweepPrefix}
	type point struct {
		bytes float64
		ratio float64
	}
	var pts []point
	var parts []string
	for _, n := range sweepLimits {
		name := sweepPrefix + strconv.Itoa(n)
		f, h := findRow(rows, name+"-file", kindTradergate, labelFile), findRow(rows, name+"-heap", kindTradergate, labelHeap)
		if f == nil || h == nil || f.CPUus <= 0 || h.CPUus <= 0 || f.BytesPerResp <= 0 {
			continue
		}
		ratio, text := compareCPU(f, h)
		pts = append(pts, point{f.BytesPerResp, ratio})
		parts = append(parts, fmt.Sprintf("%s bytes: %s", fmtBytes(f.BytesPerResp), text))
	}
	if len(pts) == 0 {
		return v
	}
	slices.SortStableFunc(pts, func(a, b point) int { return cmp.Compare(a.bytes, b.bytes) })
	// The first length from which every longer one was cheaper from its
	// file.
	from := len(pts)
	for from > 0 && pts[from-1].ratio < 1 {
		from--
	}
	var cross string
	switch {
	case from == len(pts):
		cross = fmt.Sprintf("the heap was as cheap or cheaper at the longest length measured (%s bytes): cache.sendfile_max_bytes below the lengths where it wins, or page files off", fmtBytes(pts[len(pts)-1].bytes))
	case from == 0:
		cross = fmt.Sprintf("the page file was cheaper at every length measured, from %s bytes: cache.sendfile_min_bytes at most that", fmtBytes(pts[0].bytes))
	default:
		cross = fmt.Sprintf("the page file was cheaper from %s bytes up, the heap at %s bytes: cache.sendfile_min_bytes between the two", fmtBytes(pts[from].bytes), fmtBytes(pts[from-1].bytes))
	}
	v.Status = "info"
	v.Detail = cross + "; file vs heap: " + strings.Join(parts, "; ")
	return v
}

// fmtBytes writes a length in bytes with thousands separators.
func fmtBytes(b float64) string {
	s := strconv.FormatInt(int64(b+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// memoryVerdict is the memory target, on miss-full: the cache full and
// every insert evicting.
func memoryVerdict(find rowFinder) verdict {
	v := verdict{Target: "memory, cache full (miss-full): tradergate RSS <= 1.5 × cache.max_bytes + 64 MiB", Status: "n/a", Detail: "needs the tradergate row of miss-full, its RSS read"}
	m := find("miss-full", kindTradergate)
	if m == nil || m.RSSBytes == 0 || m.CacheMaxBytes <= 0 {
		return v
	}
	bound := memoryBound(m.CacheMaxBytes)
	v.Status = passIf(float64(m.RSSBytes) <= bound)
	v.Detail = fmt.Sprintf("RSS %s at the window's end (peak %s) vs %s for cache.max_bytes %s", fmtMiB(float64(m.RSSBytes)), fmtMiB(float64(m.PeakRSSBytes)), fmtMiB(bound), fmtMiB(float64(m.CacheMaxBytes)))
	if m.GCSource != "" && m.Evictions == 0 {
		// Read off the metrics: the window did not run on a full cache
		// (a slow machine's warm-up), so the figure is not the target's.
		v.Status = "n/a"
		v.Detail += "; no eviction in the window: the cache was not full, not the target's state"
	}
	switch m.GCSource {
	case "runtime":
		v.Detail += fmt.Sprintf("; GC %.1f%% of the core", 100*m.GCCPU)
	case "pauses":
		v.Detail += fmt.Sprintf("; GC stop-the-world pauses %.2f%% of the core (GC CPU itself not exported)", 100*m.GCCPU)
	default:
		v.Detail += "; GC CPU unknown (no admin /metrics)"
	}
	if m.GCSource != "" {
		v.Detail += ", Go memory limit " + fmtLimit(m.MemLimit)
	}
	return v
}

// tlsVerdicts are the targets over TLS, against nginx on the same
// certificate: HTTP/2 hits at most nginx's, HTTPS/1.1 hits below, a new
// connection at most nginx's; resumed handshakes are reported.
func tlsVerdicts(find rowFinder) []verdict {
	var out []verdict
	for _, page := range tlsHitPages() {
		h2 := "tls-h2-" + page
		out = append(out, cpuVerdict(find, "HTTP/2 cache hit "+page+": tradergate CPU/response <= nginx's over HTTP/2, identity and gzip",
			[]string{h2, h2 + "-gzip"}, kindNginx, 1, false))
	}
	for _, page := range tlsHitPages() {
		h1 := "tls-h1-" + page
		out = append(out, cpuVerdict(find, "HTTPS/1.1 cache hit "+page+": tradergate CPU/response < nginx's over HTTPS/1.1, identity and gzip",
			[]string{h1, h1 + "-gzip"}, kindNginx, 1, true))
	}
	out = append(out, cpuVerdict(find, "new TLS connection per request (full handshake, one hit): tradergate CPU/response <= nginx's",
		[]string{"tls-new-conn"}, kindNginx, 1, false))
	return append(out, resumedVerdict(find))
}

// resumedVerdict reports a resumed connection's cost on both servers, the
// share of handshakes that did resume, and the full handshake's cost
// beside it.
func resumedVerdict(find rowFinder) verdict {
	v := verdict{Target: "resumed TLS connection per request (session ticket, one hit): CPU/response, reported", Status: "n/a", Detail: "needs the tradergate and nginx rows of tls-resumed"}
	var parts []string
	for _, k := range []serverKind{kindTradergate, kindNginx} {
		r := find("tls-resumed", k)
		if r == nil || r.CPUus <= 0 {
			continue
		}
		p := fmt.Sprintf("%s %.1f CPU µs, %d of %d handshakes resumed", k, r.CPUus, r.Resumed, r.Handshakes)
		if n := find("tls-new-conn", k); n != nil && n.CPUus > 0 {
			p += fmt.Sprintf(", full handshake %.1f (×%.2f)", n.CPUus, r.CPUus/n.CPUus)
		}
		parts = append(parts, p)
	}
	if len(parts) > 0 {
		v.Status, v.Detail = "info", strings.Join(parts, "; ")
	}
	return v
}

// redisHitVerdict is the fleet's hit target: with the limiter's counters
// in Redis, a hit costs at most redisHitVsLocal times the hit with them in
// memory and sends Redis at most redisPerHit commands on average.
func redisHitVerdict(rows []row) verdict {
	v := verdict{
		Target: fmt.Sprintf("cache hit with the limits in Redis (hit-activity20-redis): tradergate CPU/response <= %g × hit-activity20's, and <= %g Redis command per response", redisHitVsLocal, redisPerHit),
		Status: "n/a", Detail: "needs the tradergate rows of hit-activity20 and hit-activity20-redis, its Redis commands read",
	}
	rd, local := findRow(rows, "hit-activity20-redis", kindTradergate, labelRedis), findRow(rows, "hit-activity20", kindTradergate, "")
	if rd == nil || local == nil || rd.CPUus <= 0 || local.CPUus <= 0 || rd.RedisCalls == nil {
		return v
	}
	ratio, text := compareCPU(rd, local)
	v.Status = passIf(ratio <= redisHitVsLocal && rd.RedisPerReq <= redisPerHit)
	v.Detail = fmt.Sprintf("%s; %.2f Redis commands per response", text, rd.RedisPerReq)
	return v
}

// fleetVerdict reports the shared tier's rows: a page another replica
// fetched, and a miss through the tier, each beside its one-replica
// counterpart, with the Redis commands each response cost.
func fleetVerdict(rows []row) verdict {
	v := verdict{Target: "the shared tier (fleet-l2-hit, fleet-l2-miss): CPU/response and Redis commands per response, reported", Status: "n/a", Detail: "needs the tradergate rows of fleet-l2-hit or fleet-l2-miss"}
	var parts []string
	for _, f := range []struct{ sc, base string }{{"fleet-l2-hit", "hit-activity20"}, {"fleet-l2-miss", "miss"}} {
		r := findRow(rows, f.sc, kindTradergate, labelRedis)
		if r == nil || r.CPUus <= 0 {
			continue
		}
		p := fmt.Sprintf("%s %.1f CPU µs", f.sc, r.CPUus)
		if r.RedisCalls != nil {
			p += fmt.Sprintf(", %.2f Redis commands", r.RedisPerReq)
		}
		if r.Upstream >= 0 {
			p += fmt.Sprintf(", %d upstream calls", r.Upstream)
		}
		if b := findRow(rows, f.base, kindTradergate, ""); b != nil && b.CPUus > 0 {
			p += fmt.Sprintf("; %s %.1f (×%.2f)", f.base, b.CPUus, r.CPUus/b.CPUus)
		}
		parts = append(parts, p)
	}
	if len(parts) > 0 {
		v.Status, v.Detail = "info", strings.Join(parts, "; ")
	}
	return v
}
