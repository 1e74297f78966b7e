// Command bench is tradergate's load benchmark: it measures the
// edge against the servers users would pick instead, on one machine, one
// core each.
//
//	go run ./bench                       every scenario, 10s each
//	go run ./bench -only hit-activity20  one page's rows
//	go run ./bench -pprof                also profile the hit and miss paths
//	go run ./bench -only idle            memory per idle TLS connection
//	go run ./bench -only fanout          subscribers of one stream, against Nchan
//
// It builds tradergate and its helpers (bench/cmd/...), starts the
// simulated legacy host, then for every scenario and server starts a fresh
// server pinned to the server CPU (taskset, GOMAXPROCS=1) and a load
// generator pinned to the other, and prints one table, also written as
// Markdown and JSON under -out. Every child process is stopped on the way
// out, Ctrl-C included.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"tradergate/bench/cpustat"
	"tradergate/bench/fixture"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// bench is one run: what it built and started, and what it found.
type bench struct {
	opt       options
	stderr    io.Writer // progress and notes
	root      string    // module root
	tmp       string    // binaries, configs, specs; removed at the end
	out       string
	bins      binaries
	procs     *procs
	client    *http.Client
	hz        int
	hzAssumed bool

	simKey, clientKey string
	end               int64 // newest data of every simulated host, Unix s
	upstream          *server
	fixtures          fixture.Fixtures
	nginx, redis      string // paths, "" when not installed
	nginxVersion      string
	varnish, h2load   string // paths, "" when not installed
	varnishVersion    string
	h2loadVersion     string
	// cert is the TLS rows' certificate; tlsClient trusts it alone.
	cert      certFiles
	tlsClient *http.Client
	redisSrv  *server
	// tgSections are the optional tradergate config sections still tried,
	// and "conncap", the idle rows' server.max_connections.
	tgSections map[string]bool
	pagesPath  string
	pageSizes  []string
	notes      []string
	seq        int
	// maxRates are the req/s of the latency groups' closed-loop rows, by
	// scenario, as first measured in the run: what the fixed-rate rows
	// take their shares of.
	maxRates map[string]float64
	// nofile is the limit on open files the servers and the load
	// generator inherit (raised to the hard limit); 0 when unknown.
	nofile uint64
}

type binaries struct {
	tradergate, simserver, ceiling, passthrough, loadgen string
}

func (b *bench) note(s string) {
	for _, n := range b.notes {
		if n == s {
			return
		}
	}
	b.notes = append(b.notes, s)
	fmt.Fprintln(b.stderr, "note:", s)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opt, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if err := checkMachine(opt); err != nil {
		return err
	}
	b := &bench{
		opt:        opt,
		stderr:     stderr,
		client:     &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableCompression: true}},
		simKey:     randomKey("sim"),
		clientKey:  randomKey("tg_bench"),
		tgSections: map[string]bool{"admin": true, "log": true, "conncap": true},
		maxRates:   map[string]float64{},
	}
	if err := b.prepareDirs(); err != nil {
		return err
	}
	defer func() {
		// nginx's cache holds a file per page it stored: after a full run,
		// hundreds of thousands, and removing them takes minutes on a slow
		// disk. Say so, or the run looks hung after its last line.
		fmt.Fprintf(stderr, "removing %s (builds, nginx's cache files)…\n", b.tmp)
		_ = os.RemoveAll(b.tmp)
	}()
	defer b.procs.stopAll() // runs first: no child outlives the run

	if err := b.setUp(ctx); err != nil {
		return err
	}
	if rest, ok := cutFanout(opt.only); ok {
		// The fanout rows have their own table: they measure streams,
		// not requests.
		if err := b.runFanout(ctx, stdout); err != nil {
			return fmt.Errorf("fanout: %w", err)
		}
		if rest == "" {
			return nil
		}
		opt.only, b.opt.only = rest, rest
	}
	scs := buildScenarios(b.fixtures, scenarioOptions{
		zipfKeys: opt.zipfKeys, firstGzipPages: opt.firstGzipPages, l2Pages: opt.l2Pages, stampedeRounds: opt.stampedeRounds, stampedeConns: opt.stampedeClients,
		stampedeDelay: opt.stampedeDelay, seed: opt.seed, idleConns: opt.idleConnections, latencyPage: opt.latencyPage,
	})
	var chosen []*scenario
	for _, sc := range scs {
		if wanted(sc, opt.only) {
			chosen = append(chosen, sc)
		}
	}
	if len(chosen) == 0 {
		return fmt.Errorf("-only %q selects no scenario", opt.only)
	}
	if err := b.capturePages(ctx, chosen); err != nil {
		return fmt.Errorf("capture tradergate's pages for the ceiling: %w", err)
	}

	rows := b.plan(chosen)
	if len(rows) == 0 {
		return fmt.Errorf("-only %q with -servers selects no row", opt.only)
	}
	fmt.Fprintf(stderr, "probing host stalls for %v…\n", stallProbeWindow)
	stalls := b.probeStalls()
	fmt.Fprintf(stderr, "%d rows × %d, about %v\n", len(rows), opt.repeat, (time.Duration(opt.repeat) * b.estimate(chosen, rows)).Round(time.Second))
	start := time.Now()
	rows = b.runMatrix(ctx, chosen, rows)
	if b.redisSrv != nil {
		b.redisSrv.stop()
	}
	computeRatios(rows)
	verdicts := checkTargets(rows)
	meta := b.meta(args, time.Since(start), stalls)
	if err := printResults(stdout, rows, verdicts); err != nil {
		return err
	}
	var profiles []profileResult
	if opt.pprof && ctx.Err() == nil {
		profiles = b.profiles(ctx, stdout, scs, chosen)
	}
	if opt.trace != "" && ctx.Err() == nil {
		profiles = append(profiles, b.traceRow(ctx, stdout, scs, rows))
	}
	if err := b.writeResults(meta, rows, verdicts, profiles); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwritten: %s, %s (logs in %s)\n", filepath.Join(b.out, "results.md"), filepath.Join(b.out, "results.json"), b.procs.logDir)
	return ctx.Err()
}

// checkMachine refuses to start where the measurements cannot be made.
func checkMachine(opt options) error {
	if runtime.GOOS != "linux" {
		return errors.New("the benchmark reads /proc and pins with taskset: Linux only")
	}
	if lookPath("taskset") == "" {
		return errors.New("taskset not found (Debian: util-linux)")
	}
	for _, cpu := range []int{opt.serverCPU, opt.loadCPU} {
		if _, err := cpustat.ReadStat(cpu); err != nil {
			return fmt.Errorf("-cpus: CPU %d: %w", cpu, err)
		}
	}
	return nil
}

// prepareDirs makes the out directory (clearing what an earlier run left
// there, which would be read as this run's), the logs and the temp dir.
func (b *bench) prepareDirs() error {
	var err error
	if b.root, err = moduleRoot(); err != nil {
		return err
	}
	b.out = b.opt.out
	if !filepath.IsAbs(b.out) {
		b.out = filepath.Join(b.root, b.out)
	}
	logDir := filepath.Join(b.out, "logs")
	_ = os.RemoveAll(logDir)
	for _, pattern := range []string{"results.*", "profile-*", "tradergate*.yaml", "nginx*.conf", "varnish.vcl"} {
		old, _ := filepath.Glob(filepath.Join(b.out, pattern))
		for _, f := range old {
			_ = os.Remove(f)
		}
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	if b.tmp, err = os.MkdirTemp("", "tradergate-bench-"); err != nil {
		return err
	}
	// Run as root, nginx's workers must reach their prefix inside.
	_ = os.Chmod(b.tmp, 0o755)
	b.procs = newProcs(logDir, b.tmp, b.opt.nice)
	return nil
}

// setUp builds the binaries, pins the orchestrator, finds the optional
// peers and starts the shared legacy host.
func (b *bench) setUp(ctx context.Context) error {
	fmt.Fprintln(b.stderr, "building…")
	err := b.build(ctx)
	if err != nil {
		return err
	}
	// From here the orchestrator only coordinates; pinning it (all its
	// threads) to the load CPU keeps even that off the server's CPU.
	if out, err := exec.Command("taskset", "-a", "-p", "-c", strconv.Itoa(b.opt.loadCPU), strconv.Itoa(os.Getpid())).CombinedOutput(); err != nil {
		b.note(fmt.Sprintf("could not pin the orchestrator to CPU %d: %v %s", b.opt.loadCPU, err, strings.TrimSpace(string(out))))
	}
	var hzOK bool
	if b.hz, hzOK = cpustat.ClockTicks(); !hzOK {
		b.hzAssumed = true
		b.note("getconf CLK_TCK failed: assumed USER_HZ = 100")
	}
	// The idle rows hold thousands of connections: every child may open
	// as many files as the hard limit allows.
	if b.nofile, err = raiseFileLimit(); err != nil {
		b.note(fmt.Sprintf("could not raise the open file limit: %v", err))
	}
	if b.opt.fanoutServerCPUs == 2 {
		b.note(fmt.Sprintf("-fanout-server-cpus 2: the fanout rows' edge (one process) ran on CPUs %d and %d with GOMAXPROCS=2, sharing the load CPU with the harness's subscribers; every other server, pinned as usual", b.opt.serverCPU, b.opt.loadCPU))
	}
	b.nginx, b.nginxVersion = nginxVersion()
	b.varnish, b.varnishVersion = varnishVersion()
	b.h2load, b.h2loadVersion = h2loadVersion()
	b.redis = lookPath("redis-server")
	if b.cert, err = makeCert(b.tmp, time.Now()); err != nil {
		return fmt.Errorf("TLS certificate: %w", err)
	}
	tc, err := tlsClientConfig(b.cert)
	if err != nil {
		return err
	}
	b.tlsClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableCompression: true, TLSClientConfig: tc}}

	b.end = time.Now().Truncate(time.Second).Unix()
	if err := b.startUpstream(ctx); err != nil {
		return fmt.Errorf("legacysim: %w", err)
	}
	if err := b.warmUpstream(ctx); err != nil {
		return fmt.Errorf("legacysim warm-up: %w", err)
	}
	return nil
}

// printResults prints the table and where each target stands.
func printResults(w io.Writer, rows []row, verdicts []verdict) error {
	fmt.Fprintln(w)
	if err := writeTable(w, rows); err != nil {
		return err
	}
	if err := writeLatencyTable(w, rows); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, v := range verdicts {
		fmt.Fprintf(w, "%-4s  %s: %s\n", v.Status, v.Target, v.Detail)
	}
	return nil
}

// cutFanout reports whether -only names the fanout rows, and the other
// names.
func cutFanout(only string) (rest string, ok bool) {
	var others []string
	for name := range strings.SplitSeq(only, ",") {
		switch name = strings.TrimSpace(name); {
		case name == "fanout":
			ok = true
		case name != "":
			others = append(others, name)
		}
	}
	return strings.Join(others, ","), ok
}

func randomKey(prefix string) string {
	var k [16]byte
	_, _ = rand.Read(k[:])
	return prefix + "_" + hex.EncodeToString(k[:])
}

func firstLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "")
}
