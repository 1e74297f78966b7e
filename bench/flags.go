package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// options are the flags.
type options struct {
	duration, warmup   time.Duration
	connections        int
	out, only          string
	servers            []serverKind
	serverCPU, loadCPU int
	pprof              bool
	zipfS              float64
	zipfKeys           int
	firstGzipPages     int
	l2Pages            int
	stampedeRounds     int
	stampedeClients    int
	stampedeDelay      time.Duration
	idleConnections    int
	seed               uint64
	tradergate         string
	nice               int
	repeat             int
	// latencyPage is the hit page of the latency rows; trace names the
	// fixed-rate row whose tradergate run is traced after the table.
	latencyPage string
	trace       string
	// fanout are the fanout rows' subscriber counts, fanoutWindow their
	// measured time per point.
	fanout       string
	fanoutWindow time.Duration
	// fanoutReplicas, above 1, adds the fanout rows of a fleet: that
	// many edges sharing a Redis the harness starts, the subscribers
	// spread evenly over them.
	fanoutReplicas int
	// fanoutH2 adds the edge's points with HTTP/2 subscribers over TLS.
	fanoutH2 bool
	// fanoutServerCPUs, at 2, runs the edge of the fanout rows (one
	// process, not the fleet) on both CPUs with GOMAXPROCS=2.
	fanoutServerCPUs int
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per scenario and server")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load before each window")
	fs.IntVar(&o.connections, "connections", 32, "keep-alive connections of the load generator")
	fs.StringVar(&o.out, "out", "bench/results", "directory for the table (Markdown, JSON), logs and profiles; relative to the module root")
	fs.StringVar(&o.only, "only", "", "run only scenarios whose name starts with one of these (comma-separated): hit, hit-tx, hit-activity20, hit-orderbook1000, fleet, miss, miss-full, stampede, first-gzip-hit, zipf, zipf100k, tls, tls-h2, tls-h1, tls-new-conn, tls-resumed, latency (fixed-rate latency: latency-h1, latency-tls-h1, latency-tls-h2), idle, idle-h1, idle-h2, fanout (subscribers of one order book stream, against Nchan: only when named); sweep (the page size sweep, page files against the heap: only when named)")
	cpus := fs.String("cpus", "1,0", "server CPU, load generator CPU")
	servers := fs.String("servers", "", "run only the rows of these servers (comma-separated): tradergate, ceiling-fasthttp, ceiling, ceiling+headers, nginx, nginx-tuned, varnish, passthrough, legacysim; nchan (the fanout rows only)")
	fs.BoolVar(&o.pprof, "pprof", false, "after the table, profile tradergate's CPU on hit-activity20, miss and miss-full; with -only, on the first hit row and the miss rows chosen (admin pprof when served, else perf)")
	fs.Float64Var(&o.zipfS, "zipf-s", 1, "Zipf exponent of the mix")
	fs.IntVar(&o.zipfKeys, "zipf-keys", 10000, "keys in the Zipf mix")
	fs.IntVar(&o.firstGzipPages, "first-gzip-pages", 10000, "distinct pages of first-gzip-hit, stored identity then each asked once for gzip (they must fit the default cache: 10,000 20-item pages take about 180 MB)")
	fs.IntVar(&o.l2Pages, "l2-pages", 5000, "distinct pages of fleet-l2-hit, fetched by the other replica then each asked once of the measured one")
	fs.IntVar(&o.stampedeRounds, "stampede-rounds", 10, "cold keys in the stampede, one round each")
	fs.IntVar(&o.stampedeClients, "stampede-clients", 256, "clients released at once per stampede round")
	fs.DurationVar(&o.stampedeDelay, "stampede-delay", 100*time.Millisecond, "legacysim answer delay during the stampede, so every client arrives while the first miss is in flight")
	fs.IntVar(&o.idleConnections, "idle-connections", 5000, "TLS connections of the idle rows, each making one request and then idling")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the Zipf mix")
	fs.StringVar(&o.tradergate, "tradergate", "", "use this tradergate binary instead of building the working tree")
	fs.IntVar(&o.repeat, "repeat", 1, "run the whole matrix this many times, rows interleaved, and report each row's median run")
	fs.StringVar(&o.latencyPage, "latency-page", "activity20-gzip", "hit page of the latency rows: tx, activity20 or orderbook1000, each also with -gzip")
	fs.StringVar(&o.trace, "trace", "", "after the table, run this row (a fixed-rate one, e.g. latency-h1-75, or a plain HTTP/1.1 hit row, e.g. hit-activity20-gzip, or miss or miss-full) once more on tradergate under a Go execution trace, and report what its slowest answers waited on")
	fs.StringVar(&o.fanout, "fanout", "1,100,1000,10000", "subscriber counts of the fanout rows (-only fanout): one order book stream, each count a point on a fresh server")
	fs.DurationVar(&o.fanoutWindow, "fanout-window", 10*time.Second, "measured time of each fanout point (after the subscribers connect and settle 2s); at most 20s")
	fs.IntVar(&o.fanoutReplicas, "fanout-replicas", 1, "above 1, the fanout rows also run on a fleet of this many edges sharing a Redis the harness starts, the subscribers spread evenly over them (at most 8)")
	fs.IntVar(&o.fanoutServerCPUs, "fanout-server-cpus", 1, "1: the fanout rows' edge runs pinned to the server CPU with GOMAXPROCS=1, as every server; 2: the edge (one process, not the fleet) runs on both CPUs with GOMAXPROCS=2, sharing the load CPU with the harness's subscribers")
	fs.BoolVar(&o.fanoutH2, "fanout-h2", false, "the fanout rows also run the edge (one process) with HTTP/2 subscribers over TLS: Go's HTTP/2 client, many streams a connection (up to the edge's 250)")
	fs.IntVar(&o.nice, "nice", 0, "run every server and the load generator under nice -n N (negative needs root): on a shared machine, keeps other work off the pinned CPUs")
	err := fs.Parse(args)
	if err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := checkLatencyFlags(o.latencyPage, o.trace); err != nil {
		return o, err
	}
	if o.servers, err = parseServers(*servers); err != nil {
		return o, err
	}
	s, l, ok := strings.Cut(*cpus, ",")
	var err1, err2 error
	o.serverCPU, err1 = strconv.Atoi(strings.TrimSpace(s))
	o.loadCPU, err2 = strconv.Atoi(strings.TrimSpace(l))
	switch {
	case !ok || err1 != nil || err2 != nil || o.serverCPU < 0 || o.loadCPU < 0:
		return o, fmt.Errorf("-cpus %q: want two CPU numbers, server first (\"1,0\")", *cpus)
	case o.serverCPU == o.loadCPU:
		return o, errors.New("-cpus: the server and the load generator need different CPUs")
	case o.duration < time.Second || o.warmup < 0 || o.connections < 1:
		return o, errors.New("-duration must be at least 1s, -warmup not negative, -connections at least 1")
	case o.fanoutWindow < time.Second || o.fanoutWindow > 20*time.Second:
		return o, errors.New("-fanout-window between 1s and 20s")
	case o.fanoutServerCPUs != 1 && o.fanoutServerCPUs != 2:
		return o, errors.New("-fanout-server-cpus is 1 or 2")
	case o.fanoutReplicas < 1 || o.fanoutReplicas > 8:
		return o, errors.New("-fanout-replicas between 1 and 8")
	case o.idleConnections < 1:
		return o, errors.New("-idle-connections at least 1")
	case o.zipfKeys < 100 || o.stampedeRounds < 1 || o.stampedeClients < 2 || o.repeat < 1 || o.firstGzipPages < 100 || o.l2Pages < 100:
		return o, errors.New("-zipf-keys, -first-gzip-pages and -l2-pages at least 100, -stampede-rounds at least 1, -stampede-clients at least 2, -repeat at least 1")
	}
	return o, nil
}

// parseServers reads -servers; empty: every server.
func parseServers(list string) ([]serverKind, error) {
	var out []serverKind
	for name := range strings.SplitSeq(list, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		k := serverKind(name)
		if k.about() == "" {
			return nil, fmt.Errorf("-servers: unknown server %q", name)
		}
		out = append(out, k)
	}
	return out, nil
}

// checkLatencyFlags refuses a latency page that is not a hit row's, and a
// traced row that is neither a fixed-rate row nor a plain hit row.
func checkLatencyFlags(page, trace string) error {
	base := strings.TrimSuffix(page, "-gzip")
	if base != "tx" && base != "activity20" && base != "orderbook1000" {
		return fmt.Errorf("-latency-page %q: want tx, activity20 or orderbook1000, each also with -gzip", page)
	}
	if trace == "" || slices.Contains(tracedMisses, trace) || strings.HasPrefix(trace, "hit-") && !strings.HasSuffix(trace, "-redis") {
		return nil
	}
	for _, g := range latencyGroups() {
		for _, share := range latencyShares {
			if trace == fmt.Sprintf("latency-%s-%.0f", g.name, share*100) {
				return nil
			}
		}
	}
	return fmt.Errorf("-trace %q: want a fixed-rate row, latency-<h1|tls-h1|tls-h2>-<25|50|75>, a plain hit row, hit-<page>, or miss or miss-full", trace)
}
