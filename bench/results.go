package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// meta describes the run, so a table can be compared with another.
type meta struct {
	Date        string   `json:"date"`
	Command     string   `json:"command"`
	Commit      string   `json:"commit"`
	GoVersion   string   `json:"go"`
	Kernel      string   `json:"kernel"`
	CPUModel    string   `json:"cpu_model"`
	CPUs        string   `json:"cpus"` // "server N, load generator M"
	Nginx       string   `json:"nginx,omitempty"`
	Varnish     string   `json:"varnish,omitempty"`
	H2load      string   `json:"h2load,omitempty"`
	ClockTicks  int      `json:"user_hz"`
	HzAssumed   bool     `json:"user_hz_assumed,omitempty"`
	Duration    string   `json:"duration"`
	Warmup      string   `json:"warmup"`
	Connections int      `json:"connections"`
	ZipfS       float64  `json:"zipf_s"`
	ZipfKeys    int      `json:"zipf_keys"`
	Stampede    string   `json:"stampede"`
	WallTime    string   `json:"wall_time"`
	Pages       []string `json:"pages,omitempty"`
	Notes       []string `json:"notes,omitempty"`
	// THP is the kernel's transparent huge page mode (the bracketed word
	// of /sys/kernel/mm/transparent_hugepage/enabled): under "madvise",
	// the default of many kernels, Go's heap gets 4 KiB pages, and a
	// cache filling pays a page fault per 4 KiB (docs/BENCHMARKS.md).
	THP string `json:"transparent_hugepages,omitempty"`
	// ScratchFS is the file system of the run's scratch directory, where
	// nginx keeps its cache files (TMPDIR chooses it).
	ScratchFS string `json:"scratch_fs,omitempty"`
	// Stalls is what a thread spinning on each pinned CPU saw before the
	// rows (hoststall.go).
	Stalls []stallReport `json:"host_stalls,omitempty"`
}

type profileResult struct {
	Scenario string `json:"scenario"`
	Server   string `json:"server"`
	Report   string `json:"report,omitempty"`
	Error    string `json:"error,omitempty"`
}

func (b *bench) meta(args []string, wall time.Duration, stalls []stallReport) meta {
	m := meta{
		Date:        time.Now().UTC().Format(time.RFC3339),
		Command:     strings.TrimSpace("go run ./bench " + strings.Join(args, " ")),
		Commit:      gitDescribe(b.root),
		GoVersion:   runtime.Version(),
		Kernel:      readTrim("/proc/sys/kernel/osrelease"),
		CPUModel:    cpuModel(),
		CPUs:        fmt.Sprintf("server %d, load generator and legacysim %d", b.opt.serverCPU, b.opt.loadCPU),
		THP:         thpMode(readTrim("/sys/kernel/mm/transparent_hugepage/enabled")),
		ScratchFS:   b.tmp + " on " + fsType(b.tmp),
		Stalls:      stalls,
		Nginx:       b.nginxVersion,
		Varnish:     b.varnishVersion,
		H2load:      b.h2loadVersion,
		ClockTicks:  b.hz,
		HzAssumed:   b.hzAssumed,
		Duration:    b.opt.duration.String(),
		Warmup:      b.opt.warmup.String(),
		Connections: b.opt.connections,
		ZipfS:       b.opt.zipfS,
		ZipfKeys:    b.opt.zipfKeys,
		Stampede:    fmt.Sprintf("%d rounds of %d clients, legacysim delayed %v", b.opt.stampedeRounds, b.opt.stampedeClients, b.opt.stampedeDelay),
		WallTime:    wall.Round(time.Second).String(),
		Pages:       b.pageSizes,
		Notes:       slices.Clone(b.notes),
	}
	if b.opt.tradergate != "" {
		m.Commit += " (tradergate binary given with -tradergate)"
	}
	return m
}

func gitDescribe(dir string) string {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += " with uncommitted changes"
	}
	return c
}

func readTrim(path string) string {
	data, _ := os.ReadFile(path)
	return strings.TrimSpace(string(data))
}

// thpMode is the chosen word of a transparent_hugepage/enabled line
// ("always [madvise] never"), or "" when there is none.
func thpMode(line string) string {
	if _, rest, ok := strings.Cut(line, "["); ok {
		if mode, _, ok := strings.Cut(rest, "]"); ok {
			return mode
		}
	}
	return ""
}

func cpuModel() string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.SplitSeq(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// writeResults writes results.md and results.json under the out dir.
func (b *bench) writeResults(m meta, rows []row, verdicts []verdict, profiles []profileResult) error {
	var md bytes.Buffer
	writeMarkdown(&md, m, rows, verdicts, profiles)
	if err := os.WriteFile(filepath.Join(b.out, "results.md"), md.Bytes(), 0o644); err != nil {
		return err
	}
	data, err := json.MarshalIndent(struct {
		Meta     meta            `json:"meta"`
		Rows     []row           `json:"rows"`
		Targets  []verdict       `json:"targets"`
		Profiles []profileResult `json:"profiles,omitempty"`
	}{m, rows, verdicts, profiles}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.out, "results.json"), append(data, '\n'), 0o644)
}

func writeMarkdown(w *bytes.Buffer, m meta, rows []row, verdicts []verdict, profiles []profileResult) {
	fmt.Fprintf(w, "# tradergate benchmark, %s\n\n", m.Date)
	fmt.Fprintf(w, "`%s` at %s; %s, %s, %s; %s; %s per row after %s of warm-up, %d connections.\n\n",
		m.Command, m.Commit, m.GoVersion, m.Kernel, m.CPUModel, m.CPUs, m.Duration, m.Warmup, m.Connections)
	if m.THP != "" || m.ScratchFS != "" {
		fmt.Fprintf(w, "Transparent huge pages: %s; scratch directory (nginx's cache files): %s.\n\n", cmp.Or(m.THP, "unknown"), cmp.Or(m.ScratchFS, "unknown"))
	}
	if len(m.Stalls) > 0 {
		fmt.Fprintf(w, "Host stalls (a thread spinning %s on each pinned CPU before the rows, while no server was loaded): %s.\n\n",
			stallProbeWindow, describeStalls(m.Stalls))
	}
	writeMarkdownTable(w, rows)
	writeMarkdownLatency(w, rows)
	fmt.Fprintln(w, "\n## Targets")
	fmt.Fprintln(w)
	for _, v := range verdicts {
		fmt.Fprintf(w, "- **%s** %s: %s\n", v.Status, v.Target, v.Detail)
	}
	hz := fmt.Sprint(m.ClockTicks)
	if m.HzAssumed {
		hz += " (assumed)"
	}
	fmt.Fprintln(w, "\n## How to read it")
	fmt.Fprintln(w)
	for _, k := range []serverKind{kindTradergate, kindCeilingFast, kindCeiling, kindCeilingHeaders, kindNginx, kindPassthrough, kindLegacysim} {
		fmt.Fprintf(w, "- **%s**: %s.\n", k, k.about())
	}
	fmt.Fprintf(w, `- Every server runs alone on CPU (%s), GOMAXPROCS=1 for the Go ones, nginx with one worker; a fresh instance per row.
- CPU µs/req: busy jiffies (user+nice+system+irq+softirq) of the server's CPU in /proc/stat over the window, USER_HZ %s, per request. It includes the kernel's share of loopback TCP that lands on that CPU. "CPU busy" below 90%% means the server was not the bottleneck.
- proc µs/req: the same from the server's own process group (/proc/<pid>/stat utime+stime): no softirq, no other processes. A row whose CPU figure holds much that is neither says so (a shared machine).
- upstream: requests that reached the shared legacysim during the window (its /__stats counter). legacysim shares the load generator's CPU: in miss rows its work competes with the load generator, not with the server measured.
- ×ceiling, ×nginx: req/s over the same scenario's fasthttp ceiling and nginx rows (the Redis row uses hit-activity20's). The hit targets compare CPU µs/req instead: below nginx's, and at most 1.25 × the fasthttp ceiling's.
- RSS: the server's resident memory (VmRSS of its process group) at the window's end. Rows that store pages also note the peak, the cache's fill and evictions, and the Go GC's CPU over the window from tradergate's /metrics: go_cpu_classes_gc_total_cpu_seconds_total when exported, else go_gc_duration_seconds (stop-the-world pauses only, a lower bound).
- first-gzip-hit stores distinct 20-item pages by identity requests (unmeasured), then asks each once with Accept-Encoding: gzip: the hit where a cache that compresses lazily pays for it. Its window ends when every page has been asked, or at the duration.
- zipf100k stores 100,000 distinct 5-item pages (unmeasured) in a 1 GiB cache, then draws hits by Zipf popularity; zipf100k-one is one of those pages alone on the same configuration.
- nginx caches every page for 1s with background refresh (proxy_cache_valid 200 1s, use_stale updating, proxy_cache_lock), as it cannot tell settled pages from fresh ones; tradergate keeps settled pages 24h. Hit rows therefore show nginx refreshing about once a second.
- The idle rows (idle-h1, idle-h2) open their connections over TLS to a fresh server, each making one request and then idling; the server's RSS growth over them, read 5s after the last one opened, is the note's figure per connection. Their req/s and CPU columns are not throughput figures.
- The stampede releases all clients at once on a cold key while legacysim delays its answers (%s); its req/s is not a throughput figure. nginx's proxy_cache_lock waiters poll every 500 ms (fixed in nginx), which sets its stampede latency.
- The Zipf mix starts from an empty cache (after the load warm-up) and draws from %d keys: 20%% transactions, 30%% settled activity ranges, 30%% settled order book pages (immutable), 10%% activity first pages and 10%% open positions (fresh); exponent %g.
`, m.CPUs, hz, m.Stampede, m.ZipfKeys, m.ZipfS)
	if len(m.Pages) > 0 {
		fmt.Fprintln(w, "\nPages (as tradergate serves them):")
		fmt.Fprintln(w)
		for _, p := range m.Pages {
			fmt.Fprintf(w, "- %s\n", p)
		}
	}
	if len(m.Notes) > 0 {
		fmt.Fprintln(w, "\n## Run notes")
		fmt.Fprintln(w)
		for _, n := range m.Notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
	for _, p := range profiles {
		fmt.Fprintf(w, "\n## Profile: %s, %s\n\n", p.Server, p.Scenario)
		if p.Error != "" {
			fmt.Fprintf(w, "No profile: %s\n", p.Error)
			continue
		}
		fmt.Fprintf(w, "```\n%s```\n", firstLines(p.Report, 60))
	}
}
