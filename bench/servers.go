package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"tradergate/bench/fixture"
	"tradergate/proxy/config"
	"tradergate/proxy/front"
)

// serverKind names a server the benchmark compares.
type serverKind string

const (
	kindTradergate serverKind = "tradergate"
	// kindCeilingFast is THE ceiling: fasthttp, tradergate's HTTP/1.1
	// server, sending tradergate's bytes and headers.
	kindCeilingFast serverKind = "ceiling-fasthttp"
	// kindCeiling and kindCeilingHeaders are the same with net/http,
	// without and with tradergate's headers: for reference.
	kindCeiling        serverKind = "ceiling"
	kindCeilingHeaders serverKind = "ceiling+headers"
	kindNginx          serverKind = "nginx"
	// kindNginxTuned is nginx with the open file cache its users turn
	// on; kindVarnish is Varnish Cache, keyed and timed as nginx.
	kindNginxTuned  serverKind = "nginx-tuned"
	kindVarnish     serverKind = "varnish"
	kindPassthrough serverKind = "passthrough"
	kindLegacysim   serverKind = "legacysim"
	// kindNchan is nginx with Nchan, the fanout rows' peer only.
	kindNchan serverKind = "nchan"
)

// about explains each server in the report's notes.
func (k serverKind) about() string {
	switch k {
	case kindTradergate:
		return "the edge: auth, per-key limits, validation, cache, rewrite (variant A)"
	case kindCeilingFast:
		return "fasthttp (tradergate's HTTP/1.1 server, set up as tradergate sets it up) serving tradergate's bytes for the same URL from memory with the headers tradergate sent with them (X-RateLimit-*, RateLimit*, X-Cache, Age, ETag, Cache-Control, X-Request-Id): the ceiling of an edge built on that server, which the hit targets and the ×ceiling column compare with"
	case kindCeiling:
		return "plain net/http serving tradergate's bytes from memory, without tradergate's headers: the net/http ceiling, for reference"
	case kindCeilingHeaders:
		return "the net/http ceiling sending tradergate's headers too: what the contract's headers cost net/http alone, for reference"
	case kindNginx:
		return "nginx proxy_cache in front of the same legacysim: cache only, no auth, no limits, no rewrite (variant B bodies); in the tls- rows on TLS with tradergate's certificate"
	case kindNginxTuned:
		return "the nginx row with open_file_cache on (max=1000 inactive=60s, valid 60s), as its users tune it: hits keep their cache file open"
	case kindVarnish:
		return "Varnish Cache (malloc 256 MB) in front of the same legacysim, as nginx: keyed by path and query, 1s TTL then stale while refreshing, requests with Authorization cached (bench/varnish.vcl.tmpl), each encoding stored as sent (http_gzip_support off)"
	case kindPassthrough:
		return "httputil.ReverseProxy to legacysim: no cache, no rewrite, no auth"
	case kindLegacysim:
		return "the simulated legacy host itself, as the server under test (variant B)"
	case kindNchan:
		return "nginx with Nchan (libnginx-mod-nchan), the fanout rows' peer: an EventSource subscriber endpoint fed by the harness's publisher, which polls the same live legacy host as the edge's poller does (every second) and posts each new event to Nchan's publisher endpoint; its CPU is not counted"
	}
	return ""
}

// pathPrefix is put before the /v1 targets: only the legacy host serves
// them under /open-api; the others map /v1 themselves.
func (k serverKind) pathPrefix() string {
	if k == kindLegacysim {
		return "/open-api"
	}
	return ""
}

// startSim starts a simulated legacy host on cpu. Every instance of a run
// gets the same seed and End, so the direct baseline serves what the edges
// get from the shared upstream.
func (b *bench) startSim(ctx context.Context, name string, cpu int, fixtures string) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"-listen", addr, "-seed", "1", "-key", b.simKey, "-end", strconv.FormatInt(b.end, 10)}
	if fixtures != "" {
		args = append(args, "-fixtures", fixtures)
	}
	return b.serve(ctx, name, cpu, addr, 15*time.Second, b.bins.simserver, args...)
}

// startUpstream starts the shared legacy host on the load generator's CPU
// and reads its fixtures. It serves every edge's misses; in hit scenarios
// it is idle, and in miss scenarios its work competes with the load
// generator's, not with the server under test's.
func (b *bench) startUpstream(ctx context.Context) error {
	path := filepath.Join(b.tmp, "fixtures.json")
	s, err := b.startSim(ctx, "upstream-legacysim", b.opt.loadCPU, path)
	if err != nil {
		return err
	}
	b.upstream = s
	if err := fixture.ReadJSON(path, &b.fixtures); err != nil {
		return fmt.Errorf("fixtures: %w", err)
	}
	if len(b.fixtures.Wallets) == 0 || len(b.fixtures.TradeTxs) == 0 || len(b.fixtures.Tokens) == 0 {
		return fmt.Errorf("fixtures: the simulated host holds no data")
	}
	return nil
}

// warmUpstream makes the shared legacy host build its lazily generated
// data (order books per token, encoded wallet items) before any row, so
// that no row pays for it.
func (b *bench) warmUpstream(ctx context.Context) error {
	base := b.upstreamBase()
	var urls []string
	for _, t := range b.fixtures.Tokens {
		urls = append(urls, base+"/v1/orderbook/events?tokenId="+t+"&limit=1")
	}
	for _, w := range b.fixtures.Wallets {
		urls = append(urls, base+"/v1/trader/"+w+"/activity?limit=1", base+"/v1/trader/"+w+"/positions/open?limit=1")
	}
	for _, u := range urls {
		a, err := b.get(ctx, u, false, b.simKey)
		if err != nil {
			return err
		}
		if a.status != http.StatusOK {
			return fmt.Errorf("%s: status %d", u, a.status)
		}
	}
	return nil
}

func (b *bench) upstreamBase() string { return "http://" + b.upstream.addr + "/open-api" }

func (b *bench) statsURL() string { return "http://" + b.upstream.addr + "/__stats" }

// setUpstreamLatency delays every answer of the shared upstream (0: none),
// so that a stampede's requests all arrive while the first miss is in
// flight.
func (b *bench) setUpstreamLatency(ctx context.Context, d time.Duration) error {
	_, err := b.get(ctx, "http://"+b.upstream.addr+"/__faults?latency="+d.String(), false, "")
	return err
}

// frontLimits is the server section tradergate runs with in the
// benchmark: the template's, with config.yaml's defaults for what it
// leaves out.
func frontLimits() (front.Config, error) {
	data, err := renderTGConfig(tgConfig{Port: 1, AdminPort: 2, UpstreamURL: "http://127.0.0.1:3/open-api", KeySHA256: hashKey("k"), CacheMaxBytes: defaultCacheBytes})
	if err != nil {
		return front.Config{}, err
	}
	c, err := config.Parse(data)
	if err != nil {
		return front.Config{}, fmt.Errorf("the benchmark's tradergate config: %w", err)
	}
	return c.Server, nil
}

// isCeiling: the server answers from memory and has no upstream.
func (k serverKind) isCeiling() bool {
	return k == kindCeilingFast || k == kindCeiling || k == kindCeilingHeaders
}

// ceilingArgs are bench/cmd/ceiling's flags for a ceiling kind, besides
// -listen and -pages. The fasthttp ceiling runs with the limits of
// tradergate's HTTP/1.1 front (fl): each deadline is a clock reading and
// a timer reset per request, which the server pays whoever answers.
func ceilingArgs(k serverKind, fl front.Config) []string {
	switch k {
	case kindCeilingFast:
		return []string{"-engine", "fasthttp", "-headers",
			"-read-timeout", min(fl.ReadHeaderTimeout, fl.ReadTimeout).String(),
			"-write-timeout", fl.WriteTimeout.String(),
			"-idle-timeout", fl.IdleTimeout.String(),
			"-read-buffer", strconv.Itoa(fl.MaxHeaderBytes)}
	case kindCeilingHeaders:
		return []string{"-engine", "nethttp", "-headers"}
	}
	return []string{"-engine", "nethttp"}
}

// startCeiling starts a ceiling kind with extra flags besides its own.
func (b *bench) startCeiling(ctx context.Context, kind serverKind, extra ...string) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	fl, err := frontLimits()
	if err != nil {
		return nil, err
	}
	args := append([]string{"-listen", addr, "-pages", b.pagesPath}, ceilingArgs(kind, fl)...)
	args = append(args, extra...)
	return b.serve(ctx, string(kind), b.opt.serverCPU, addr, 10*time.Second, b.bins.ceiling, args...)
}

// startCeilingProfiled is startCeiling with the ceiling's CPU profile
// served (-pprof) on the server's admin address, as tradergate serves its
// own, for the profile rows.
func (b *bench) startCeilingProfiled(ctx context.Context, kind serverKind) (*server, error) {
	admin, err := freeAddr()
	if err != nil {
		return nil, err
	}
	srv, err := b.startCeiling(ctx, kind, "-pprof", admin)
	if err != nil {
		return nil, err
	}
	srv.admin = admin
	return srv, nil
}

func (b *bench) startPassthrough(ctx context.Context) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	return b.serve(ctx, "passthrough", b.opt.serverCPU, addr, 10*time.Second, b.bins.passthrough,
		"-listen", addr, "-upstream", b.upstreamBase(), "-key", b.simKey)
}

// startTarget starts a fresh instance of a server under test, so that no
// row inherits another's cache or connection state.
func (b *bench) startTarget(ctx context.Context, kind serverKind, sc *scenario) (*server, error) {
	switch kind {
	case kindTradergate:
		redis := ""
		if sc.redis {
			redis = b.redisSrv.addr
		}
		return b.startTradergate(ctx, sc.variant(redis))
	case kindCeilingFast, kindCeiling, kindCeilingHeaders:
		return b.startCeiling(ctx, kind)
	case kindNginx, kindNginxTuned:
		return b.startNginx(ctx, kind == kindNginxTuned, sc.proto.tls(), sc.conns)
	case kindVarnish:
		return b.startVarnish(ctx)
	case kindPassthrough:
		return b.startPassthrough(ctx)
	case kindLegacysim:
		return b.startSim(ctx, "legacysim", b.opt.serverCPU, "")
	}
	return nil, fmt.Errorf("unknown server %q", kind)
}

// serve starts a server process pinned to cpu and waits up to wait for it
// to listen on addr; one that does not is stopped, and the error carries
// the tail of its stderr.
func (b *bench) serve(ctx context.Context, name string, cpu int, addr string, wait time.Duration, bin string, args ...string) (*server, error) {
	p, err := b.procs.start(name, cpu, startOpts{}, bin, args...)
	if err != nil {
		return nil, err
	}
	if err := waitPort(ctx, p, addr, wait); err != nil {
		p.stop(2 * time.Second)
		return nil, errorWithTail(err, p)
	}
	return &server{addr: addr, proc: p}, nil
}

// ownScratch, deferred by a start function once it has made dir, the
// server's own directory: a server that started owns dir and removes it
// when it stops; when the start failed, dir is removed now, rather than
// with the run's scratch directory at the end of the run.
func ownScratch(srv **server, dir string) {
	if *srv != nil {
		(*srv).scratch = dir
		return
	}
	_ = os.RemoveAll(dir)
}

func errorWithTail(err error, p *proc) error {
	if tail := p.stderrTail(1500); tail != "" {
		return fmt.Errorf("%w\n%s", err, tail)
	}
	return err
}
