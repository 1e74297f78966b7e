package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"tradergate/bench/fixture"
	"tradergate/bench/load"
)

// runRow runs one scenario against a fresh instance of one server.
func (b *bench) runRow(ctx context.Context, sc *scenario, kind serverKind) row {
	r := row{Scenario: sc.name, Base: sc.base, Server: kind, Upstream: -1, Label: sc.label()}
	b.procs.setTag(sc.name)
	defer b.procs.setTag("")
	if sc.redis {
		// Every row starts from an empty Redis, as from a fresh server:
		// no page of an earlier row (or repetition) in the shared tier.
		if err := redisFlush(b.redisSrv.addr); err != nil {
			r.Failed = "redis FLUSHALL: " + err.Error()
			return r
		}
	}
	srv, err := b.startTarget(ctx, kind, sc)
	if err != nil {
		r.Failed = "start: " + err.Error()
		return r
	}
	defer srv.stop()

	prefix := kind.pathPrefix()
	if sc.prefill > 0 {
		target := srv
		if sc.fromOtherReplica {
			other, err := b.startTradergate(ctx, tgVariant{redisAddr: b.redisSrv.addr, otherReplica: true})
			if err != nil {
				r.Failed = "the other replica: " + err.Error()
				return r
			}
			defer other.stop()
			target = other
		}
		if err := b.prefill(ctx, sc, kind, target, prefix); err != nil {
			r.Failed = "prefill: " + err.Error()
			return r
		}
		if sc.fromOtherReplica {
			if note := b.waitL2Stores(ctx, target, sc.prefill); note != "" {
				r.Notes = append(r.Notes, note)
			}
		}
	}
	if sc.mode == load.ModeList || sc.mode == load.ModeIdle {
		if err := b.warm(ctx, sc, kind, srv, prefix); err != nil {
			r.Failed = "warm-up: " + err.Error()
			return r
		}
	}
	if sc.latency > 0 {
		if err := b.setUpstreamLatency(ctx, sc.latency); err != nil {
			r.Failed = "upstream latency: " + err.Error()
			return r
		}
		defer func() { _ = b.setUpstreamLatency(context.WithoutCancel(ctx), 0) }()
	}
	spec := b.spec(sc, kind, srv, prefix)
	if sc.rate != nil {
		if spec.Rate, err = b.latencyRate(sc); err != nil {
			r.Failed = err.Error()
			return r
		}
	}
	res, err := b.runLoad(ctx, spec, string(kind))
	if err != nil {
		r.Failed = "load: " + err.Error()
		return r
	}
	if kind == kindTradergate {
		r.CacheMaxBytes = cmp.Or(sc.cacheBytes, defaultCacheBytes)
	}
	r.fill(sc, res, b.hz)
	if srv.proc.exited() {
		r.Notes = append(r.Notes, "server exited during the run: "+srv.proc.stderrTail(300))
	}
	// The access log lines are counted once the process is gone.
	srv.stop()
	if n := srv.proc.droppedLines(); n > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("access log ON: %d lines written (kept out of the logs by the harness)", n))
	}
	return r
}

// headers are what every request of a row carries. Every server gets the
// same client key header, so request sizes match; only the legacy host
// itself needs its own key.
func (b *bench) headers(sc *scenario, kind serverKind) []string {
	key := b.clientKey
	if kind == kindLegacysim {
		key = b.simKey
	}
	h := []string{"Authorization: Bearer " + key, "User-Agent: tradergate-bench"}
	if sc.gzip {
		h = append(h, "Accept-Encoding: gzip")
	}
	return h
}

func (b *bench) spec(sc *scenario, kind serverKind, srv *server, prefix string) load.Spec {
	s := load.Spec{
		Addr:        srv.addr,
		Headers:     b.headers(sc, kind),
		Mode:        sc.mode,
		ZipfS:       b.opt.zipfS,
		Seed:        b.opt.seed,
		Connections: b.opt.connections,
		Warmup:      b.warmupOf(sc),
		Duration:    b.windowOf(sc),
		Rounds:      sc.rounds,
		ServerCPU:   b.opt.serverCPU,
		LoadCPU:     b.opt.loadCPU,
		ServerPGID:  srv.proc.pid(),
		SampleCache: kind == kindTradergate || kind == kindNginx || kind == kindNginxTuned || kind == kindVarnish,
	}
	if sc.conns > 0 {
		s.Connections = sc.conns
	}
	for _, u := range sc.urls {
		s.URLs = append(s.URLs, prefix+u)
	}
	for _, t := range sc.tmpl {
		s.Templates = append(s.Templates, prefix+t)
	}
	s.SeqStart, s.SeqStep, s.SeqCount = sc.start, 1, int64(sc.count)
	if sc.count > 0 {
		// A bounded window asks each connection for a few dozen pages:
		// one in 64 would leave X-Cache all but unread.
		s.SampleEvery = 4
	}
	if sc.hit && kind == kindTradergate {
		s.CheckCache = "HIT"
	}
	if kind == kindTradergate && srv.admin != "" {
		s.MetricsURL, s.Metrics = "http://"+srv.admin+"/metrics", scrapedMetrics()
	}
	if sc.redis {
		s.RedisAddr = b.redisSrv.addr
	}
	switch sc.proto {
	case protoH1TLS, protoH2:
		// h2load reads no headers: the warm-up made the page a hit.
		s.Mode, s.URLs, s.CheckCache, s.SampleCache = load.ModeH2load, nil, "", false
		s.Command = h2loadCommand(b.h2load, sc.proto, "https://"+srv.addr+prefix+sc.urls[0], s.Headers, sc.gzip, s.Connections, s.Warmup, s.Duration)
	case protoGoH1TLS, protoGoH2:
		s.TLS = &load.TLSSpec{CAFile: b.cert.cert, ServerName: tlsServerName, HTTP2: sc.proto == protoGoH2}
		s.Streams = h2loadStreams
	case protoNewConn, protoResumed:
		s.TLS = &load.TLSSpec{CAFile: b.cert.cert, ServerName: tlsServerName, NewConnection: true, Resume: sc.proto == protoResumed}
	case protoIdleH1, protoIdleH2:
		// The warm-up made the page a hit; the connections idle for
		// idleSettle once open.
		s.TLS = &load.TLSSpec{CAFile: b.cert.cert, ServerName: tlsServerName, HTTP2: sc.proto == protoIdleH2}
		s.Warmup, s.Duration, s.CheckCache, s.SampleCache = 0, idleSettle, "", false
		if s.MetricsURL != "" {
			s.Metrics = idleMetrics()
		}
	}
	if sc.latencyGroup != "" && s.MetricsURL != "" {
		s.Metrics = append(s.Metrics, latencyMetrics()...)
		s.Histograms = latencyHistograms()
	}
	// The legacy host as the server under test is its own upstream; the
	// ceiling has none.
	if kind != kindLegacysim && !kind.isCeiling() {
		s.StatsURL = b.statsURL()
	}
	return s
}

// warmupOf is sc's unmeasured load: -warmup, or the scenario's own when
// longer; none for a bounded sequence, whose pages it would spend.
func (b *bench) warmupOf(sc *scenario) time.Duration {
	if sc.count > 0 {
		return 0
	}
	return max(b.opt.warmup, sc.warmup)
}

// windowOf is sc's measured time: -duration, or the scenario's own when
// shorter.
func (b *bench) windowOf(sc *scenario) time.Duration {
	if sc.window > 0 {
		return min(sc.window, b.opt.duration)
	}
	return b.opt.duration
}

// warm requests every URL of a list scenario before the clock starts, and
// for tradergate's hit scenarios until it answers HIT, so that the window
// measures what the scenario names. (The Zipf mix starts cold on purpose:
// its upstream ratio includes filling the cache.)
func (b *bench) warm(ctx context.Context, sc *scenario, kind serverKind, srv *server, prefix string) error {
	key := b.clientKey
	if kind == kindLegacysim {
		key = b.simKey
	}
	wantHit := sc.hit && kind == kindTradergate
	scheme := "http://"
	if srv.tls {
		scheme = "https://"
	}
	for _, u := range sc.urls {
		for attempt := 0; ; attempt++ {
			a, err := b.get(ctx, scheme+srv.addr+prefix+u, sc.gzip, key)
			if err != nil {
				return err
			}
			if a.status/100 != 2 {
				return fmt.Errorf("%s: status %d: %.300s", u, a.status, a.body)
			}
			xc := a.header.Get("X-Cache")
			if !wantHit || xc == "HIT" {
				break
			}
			if attempt == 40 {
				return fmt.Errorf("%s: %w (last: %q)", u, errNotHit, xc)
			}
			// The cache's admission runs asynchronously; give it a moment.
			time.Sleep(25 * time.Millisecond)
		}
	}
	return nil
}

// runLoad runs the load generator as its own process, pinned to the load
// CPU, and reads its result.
func (b *bench) runLoad(ctx context.Context, spec load.Spec, name string) (*load.Result, error) {
	p, outPath, err := b.startLoad(spec, name)
	if err != nil {
		return nil, err
	}
	return b.waitLoad(ctx, p, spec, outPath)
}

// startLoad starts the load generator process for spec.
func (b *bench) startLoad(spec load.Spec, name string) (*proc, string, error) {
	b.seq++
	specPath := filepath.Join(b.tmp, fmt.Sprintf("spec-%03d.json", b.seq))
	outPath := filepath.Join(b.tmp, fmt.Sprintf("result-%03d.json", b.seq))
	if err := fixture.WriteJSON(specPath, spec); err != nil {
		return nil, "", err
	}
	p, err := b.procs.start("loadgen."+name, b.opt.loadCPU, startOpts{}, b.bins.loadgen, "-spec", specPath, "-out", outPath)
	return p, outPath, err
}

// waitLoad waits for the load generator, bounded by what its spec can
// take, and reads its result.
func (b *bench) waitLoad(ctx context.Context, p *proc, spec load.Spec, outPath string) (*load.Result, error) {
	limit := spec.Warmup + spec.Duration + time.Minute
	switch spec.Mode {
	case load.ModeStampede:
		limit = time.Duration(spec.Rounds)*(30*time.Second) + time.Minute
	case load.ModeIdle: // a handshake and a request per connection first
		limit += time.Duration(spec.Connections) * 10 * time.Millisecond
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.stop(2 * time.Second)
		return nil, ctx.Err()
	case <-time.After(limit):
		p.stop(2 * time.Second)
		return nil, fmt.Errorf("load generator still running after %v", limit)
	}
	if p.err != nil {
		return nil, errorWithTail(p.err, p)
	}
	var res load.Result
	if err := fixture.ReadJSON(outPath, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// get fetches url with the harness's own client (never during a measured
// window), over TLS for an https URL. Compression is not negotiated unless gzip is set, and a gzip
// body is returned as sent.
func (b *bench) get(ctx context.Context, url string, gzip bool, auth string) (*httpAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	if gzip {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	client := b.client
	if req.URL.Scheme == "https" {
		client = b.tlsClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &httpAnswer{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

type httpAnswer struct {
	status int
	header http.Header
	body   []byte
}

var errNotHit = errors.New("never answered X-Cache: HIT")

// cacheSummary renders sampled X-Cache values as "HIT 98.5%, MISS 1.5%".
func cacheSummary(m map[string]int64) string {
	var total int64
	keys := make([]string, 0, len(m))
	for k, v := range m {
		total += v
		keys = append(keys, k)
	}
	if total == 0 {
		return ""
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		name := k
		if name == "" {
			name = "(none)"
		}
		parts = append(parts, fmt.Sprintf("%s %.1f%%", name, 100*float64(m[k])/float64(total)))
	}
	return strings.Join(parts, ", ")
}
