package main

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"tradergate/bench/fixture"
	"tradergate/bench/load"
)

// scenario is one line of the benchmark's list, run against several servers.
// Targets are variant A /v1 paths; a server that serves them elsewhere
// gets its prefix (serverKind.pathPrefix).
type scenario struct {
	name  string
	about string
	// base names the scenario whose ceiling and nginx rows this one's
	// ratios use ("" : its own).
	base  string
	gzip  bool
	mode  load.Mode
	urls  []string
	tmpl  []string // load.ModeSequence
	start int64
	// servers run this scenario, in this order.
	servers []serverKind
	// hit: tradergate must answer X-Cache: HIT; the URLs are fetched until
	// it does before the window opens.
	hit bool
	// redis runs tradergate with the limiter's Redis store.
	redis bool
	// heap runs tradergate with page files off (cache.sendfile_min_bytes:
	// -1): every answer written from the heap, as the ceiling writes it.
	heap bool
	// allFiles runs tradergate with every form in a page file, whatever
	// its length (cache.sendfile_min_bytes: 1): the sweep's file rows.
	allFiles bool
	// optIn: the scenario runs only when -only names it, not in a run of
	// everything (the page size sweep).
	optIn bool
	// conns overrides -connections (the stampede's 256 clients).
	conns  int
	rounds int
	// latency delays the upstream's answers while the scenario runs.
	latency time.Duration
	// warmup, when longer than -warmup, is this scenario's unmeasured load.
	warmup time.Duration
	// window, when set, is this scenario's measured time, or -duration
	// when that is shorter (the latency rows, latency.go).
	window time.Duration
	// latencyGroup names the protocol group of a latency row ("h1",
	// "tls-h1", "tls-h2"); rate, on its fixed-rate rows, is the schedule,
	// a share of the rate nginx reached on the group's closed-loop row.
	latencyGroup string
	rate         *fixedRate
	// prefill, when positive, is how many targets of tmpl (from start)
	// are requested once each, identity, before the window: the pages the
	// window then finds in the cache.
	prefill int
	// count bounds a sequence window: each target once, then the window
	// ends (load.Spec.SeqCount). Such a window has no warm-up: its pages
	// would be spent there.
	count int
	// cacheBytes is tradergate's cache.max_bytes (0: the default).
	cacheBytes int64
	// proto is how the load reaches the server: plain HTTP/1.1 from the
	// load generator (""), or over TLS (load/tls.go).
	proto proto
	// fromOtherReplica: the prefill goes to the fleet's other replica,
	// so that the window reads its pages from the shared tier (redis).
	fromOtherReplica bool
}

// Labels of the variants of tradergate, shown instead of the server's
// name.
const (
	labelRedis = "tradergate+redis"
	labelHeap  = "tradergate-heap"
	labelFile  = "tradergate-file"
)

// proto is how a row's load reaches its server.
type proto string

const (
	protoHTTP proto = ""
	// protoH1TLS and protoH2 are h2load's (HTTPS/1.1, HTTP/2) on kept
	// connections.
	protoH1TLS proto = "https/1.1"
	protoH2    proto = "h2"
	// protoNewConn and protoResumed are the load generator's HTTPS/1.1,
	// one request per connection: a full handshake each, or a resumed
	// one (TLS 1.3 session tickets).
	protoNewConn proto = "tls-new"
	protoResumed proto = "tls-resumed"
	// protoIdleH1 and protoIdleH2 are the idle rows' TLS connections,
	// HTTP/1.1 and HTTP/2, each making one request and then idling
	// (load.ModeIdle).
	protoIdleH1 proto = "idle-https/1.1"
	protoIdleH2 proto = "idle-h2"
	// protoGoH1TLS and protoGoH2 are the load generator's own TLS
	// clients on kept connections, HTTPS/1.1 and HTTP/2 (the latency
	// rows, which h2load cannot run on a schedule).
	protoGoH1TLS proto = "go-https/1.1"
	protoGoH2    proto = "go-h2"
)

// tls: the server terminates TLS.
func (p proto) tls() bool { return p != protoHTTP }

// h2load: the load is h2load's.
func (p proto) h2load() bool { return p == protoH1TLS || p == protoH2 }

// pageFileScenarios are the hit rows whose answers are long enough for a
// page file (cache.sendfile_min_bytes): each also runs with page files
// off, as <name>-heap.
var pageFileScenarios = []string{"hit-orderbook1000", "hit-orderbook1000-gzip"}

// label names the variant of tradergate the scenario runs; "" for the
// default configuration.
func (sc *scenario) label() string {
	switch {
	case sc.redis:
		return labelRedis
	case sc.heap:
		return labelHeap
	case sc.allFiles:
		return labelFile
	}
	return ""
}

// variant is how the scenario's tradergate differs from the default.
func (sc *scenario) variant(redisAddr string) tgVariant {
	v := tgVariant{redisAddr: redisAddr, cacheBytes: sc.cacheBytes, noPageFiles: sc.heap, allPageFiles: sc.allFiles, tls: sc.proto.tls()}
	if sc.mode == load.ModeIdle {
		v.maxConns = sc.conns
	}
	return v
}

// bigCacheBytes is the zipf100k rows' cache: four times the default.
const bigCacheBytes = 4 * defaultCacheBytes

// fullCacheWarmup is miss-full's warm-up: long enough for tradergate's
// default cache (config.yaml) to fill and its heap to stop growing at a
// 2-CPU machine's miss rate, twice that for a slower machine
// (docs/BENCHMARKS.md, Scenarios).
const fullCacheWarmup = 12 * time.Second

// Settled bounds: an hour before the newest data is well past the cache
// policy's 5 minute settle window, so these pages are immutable for
// tradergate (docs/ARCHITECTURE.md "Cache policy").
const settledAge = 3600

// hitPages are the three page shapes of the cache hit scenario.
func hitPages(f fixture.Fixtures) []struct{ name, about, url string } {
	settled := f.End - settledAge
	return []struct{ name, about, url string }{
		{"tx", "a one-item answer: transaction detail", "/v1/tx/" + f.TradeTxs[0]},
		{"activity20", "a 20-item activity page", "/v1/trader/" + f.Wallets[0] + "/activity?toTimestamp=" + strconv.FormatInt(settled, 10) + "&limit=20"},
		{"orderbook1000", "a 1000-event order book page", "/v1/orderbook/events?tokenId=" + f.Tokens[0] + "&to=" + strconv.FormatInt(settled*1000, 10) + "&limit=1000"},
	}
}

// scenarioOptions are the figures of the scenarios that flags set.
type scenarioOptions struct {
	zipfKeys int
	// firstGzipPages are first-gzip-hit's pages.
	firstGzipPages int
	// l2Pages are fleet-l2-hit's pages.
	l2Pages        int
	stampedeRounds int
	stampedeConns  int
	stampedeDelay  time.Duration
	seed           uint64
	// idleConns are the idle rows' connections.
	idleConns int
	// latencyPage is the latency rows' hit page (latencyPage).
	latencyPage string
}

// buildScenarios returns every scenario, in running order.
func buildScenarios(f fixture.Fixtures, o scenarioOptions) []*scenario {
	var out []*scenario
	for _, p := range hitPages(f) {
		for _, gz := range []bool{false, true} {
			sc := &scenario{
				name: "hit-" + p.name, about: "cache hit, " + p.about, gzip: gz, mode: load.ModeList,
				urls: []string{p.url}, hit: true,
				servers: []serverKind{kindTradergate, kindCeilingFast, kindCeiling, kindCeilingHeaders, kindNginx, kindNginxTuned, kindVarnish, kindPassthrough, kindLegacysim},
			}
			if gz {
				sc.name += "-gzip"
				sc.about += ", Accept-Encoding: gzip"
				// Without a cache the gzip rows only add the legacy host's
				// compression on the load generator's CPU.
				sc.servers = sc.servers[:7]
			}
			out = append(out, sc)
		}
	}
	// The order book's two answers (~500 KB identity, 92 KB gzip) again
	// on tradergate alone, each right after its own rows, with page files
	// off: which of the two ways is cheaper depends on the host
	// (docs/CONFIGURATION.md, Page files), and these rows say which it is
	// here (pageFileVerdict).
	for _, name := range pageFileScenarios {
		i := slices.IndexFunc(out, func(sc *scenario) bool { return sc.name == name })
		heap := *out[i]
		heap.name, heap.base, heap.heap = heap.name+"-heap", heap.name, true
		heap.about += ", page files off"
		heap.servers = []serverKind{kindTradergate}
		out = slices.Insert(out, i+1, &heap)
	}
	out = append(out, &scenario{
		name: "hit-activity20-redis", base: "hit-activity20",
		about: "cache hit on the 20-item page, limiter counters in Redis (redis-server on the load CPU)",
		mode:  load.ModeList, urls: []string{hitPages(f)[1].url}, hit: true, redis: true,
		servers: []serverKind{kindTradergate},
	})

	// Cache miss: every request a new upper bound, so a new cache key,
	// fetched and normalized (and, for tradergate, stored).
	var tmpl []string
	for _, w := range f.Wallets {
		tmpl = append(tmpl, "/v1/trader/"+w+"/activity?toTimestamp={n}&limit=20")
	}
	// The fleet: replicas sharing one Redis, which the harness empties
	// before each of these rows. A page another replica fetched, read
	// from the shared tier by a replica whose memory is cold (each page
	// once); and misses that also look up and store in the shared tier.
	n := o.l2Pages
	out = append(out, &scenario{
		name: "fleet-l2-hit", base: "hit-activity20",
		about: "shared tier hit: " + strconv.Itoa(n) + " distinct 20-item pages fetched by the other replica (on the load CPU), then each asked once of this one, its memory cold",
		mode:  load.ModeSequence, tmpl: tmpl, start: f.End - settledAge, prefill: n, count: n, hit: true, redis: true, fromOtherReplica: true,
		servers: []serverKind{kindTradergate},
	}, &scenario{
		name: "fleet-l2-miss", base: "miss",
		about: "cache miss through the shared tier: every request a new key, looked up in Redis, fetched, stored in Redis",
		mode:  load.ModeSequence, tmpl: tmpl, start: f.End - settledAge, redis: true,
		servers: []serverKind{kindTradergate},
	})
	out = append(out, &scenario{
		name: "miss", about: "cache miss: every request a new key (20-item activity pages)",
		mode: load.ModeSequence, tmpl: tmpl, start: f.End - settledAge,
		servers: []serverKind{kindTradergate, kindPassthrough, kindNginx, kindNginxTuned, kindVarnish, kindLegacysim},
	})
	// The same load once the cache is full: every insert evicts, and the
	// heap has its size. The miss rows above start a fresh process, whose
	// first seconds also pay the kernel for every page the growing heap
	// touches (docs/BENCHMARKS.md, Scenarios); an edge that has been up a
	// while is in the second state. Both are reported.
	out = append(out, &scenario{
		name: "miss-full", warmup: fullCacheWarmup,
		about: "cache miss as above, measured after a " + fullCacheWarmup.String() + " warm-up that fills tradergate's cache (steady state: each insert evicts)",
		mode:  load.ModeSequence, tmpl: tmpl, start: f.End - settledAge,
		servers: []serverKind{kindTradergate, kindPassthrough, kindNginx, kindNginxTuned, kindVarnish},
	})

	out = append(out, &scenario{
		name: "stampede", about: strconv.Itoa(o.stampedeConns) + " clients at once on one cold key, " + strconv.Itoa(o.stampedeRounds) + " rounds, upstream delayed " + o.stampedeDelay.String(),
		mode: load.ModeStampede, urls: stampedeURLs(f, o.stampedeRounds), conns: o.stampedeConns, rounds: o.stampedeRounds,
		latency: o.stampedeDelay,
		servers: []serverKind{kindTradergate, kindNginx, kindPassthrough},
	})

	// The first hit that accepts gzip on a page stored identity: where a
	// cache that compresses lazily pays for the compression. Distinct
	// settled 20-item pages are stored by identity requests, then each is
	// asked once with Accept-Encoding: gzip.
	n = o.firstGzipPages
	out = append(out, &scenario{
		name: "first-gzip-hit", base: "hit-activity20-gzip",
		about: "first gzip hit: " + strconv.Itoa(n) + " distinct 20-item pages stored by identity requests, then each asked once with Accept-Encoding: gzip",
		gzip:  true, mode: load.ModeSequence, tmpl: tmpl, start: f.End - settledAge, prefill: n, count: n, hit: true,
		servers: []serverKind{kindTradergate},
	})

	out = append(out, &scenario{
		name: "zipf", about: "Zipf-distributed mix over " + strconv.Itoa(o.zipfKeys) + " keys, default TTLs",
		mode: load.ModeZipf, urls: zipfKeys(f, o.zipfKeys, o.seed),
		servers: []serverKind{kindTradergate, kindNginx},
	})

	// Hit cost against the cache's size: many distinct settled pages,
	// all stored before the window, drawn by Zipf popularity from a cache
	// four times the default; and one of them alone, on the same
	// configuration. 5-item pages (about 4 KB) let 100,000 fit.
	bigTmpl, bigStart := bigZipfTemplates(f)
	bigURLs := load.SequenceTargets(bigTmpl, bigStart, 1, bigZipfKeys)
	out = append(out, &scenario{
		name: "zipf100k", about: "cache hits over 100,000 distinct settled 5-item activity pages, all stored first, drawn by Zipf popularity; cache.max_bytes 1 GiB",
		mode: load.ModeZipf, urls: bigURLs, tmpl: bigTmpl, start: bigStart, prefill: bigZipfKeys, hit: true, cacheBytes: bigCacheBytes,
		servers: []serverKind{kindTradergate},
	}, &scenario{
		name: "zipf100k-one", about: "cache hit on one of zipf100k's pages (its most popular), same configuration: the plain hit of that page shape",
		mode: load.ModeList, urls: bigURLs[:1], hit: true, cacheBytes: bigCacheBytes,
		servers: []serverKind{kindTradergate},
	})
	out = append(out, tlsScenarios(f)...)
	out = append(out, latencyScenarios(f, o.latencyPage)...)
	out = append(out, idleScenarios(f, o.idleConns)...)
	return append(out, sweepScenarios(f)...)
}

// sweepLimits are the order book page lengths of the page size sweep:
// identity answers from about 12 KB to 500 KB, around both of
// hit-orderbook1000's forms (the gzip one is about as long as the
// 185-event page's identity answer).
var sweepLimits = []int{25, 50, 100, 150, 185, 250, 350, 500, 1000}

// sweepPrefix starts the names of the page size sweep's scenarios.
const sweepPrefix = "sweep-orderbook"

// sweepScenarios are the page size sweep (-only sweep): for each length of
// sweepLimits, the order book page's identity hit on tradergate with
// every form in a page file (<name>-file) and then with none
// (<name>-heap), back to back so that each pair saw the same neighbours.
// sweepVerdict reads from them where, by page size, the page file starts
// to cost less than the heap on this host: what cache.sendfile_min_bytes
// is for (docs/CONFIGURATION.md, Page files).
func sweepScenarios(f fixture.Fixtures) []*scenario {
	settled := f.End - settledAge
	var out []*scenario
	for _, n := range sweepLimits {
		name := sweepPrefix + strconv.Itoa(n)
		url := "/v1/orderbook/events?tokenId=" + f.Tokens[0] + "&to=" + strconv.FormatInt(settled*1000, 10) + "&limit=" + strconv.Itoa(n)
		about := "cache hit, a " + strconv.Itoa(n) + "-event order book page"
		for _, heap := range []bool{false, true} {
			sc := &scenario{
				name: name + "-file", about: about + ", every form from its page file (cache.sendfile_min_bytes: 1)",
				mode: load.ModeList, urls: []string{url}, hit: true, allFiles: true, optIn: true,
				servers: []serverKind{kindTradergate},
			}
			if heap {
				sc.name, sc.about, sc.allFiles, sc.heap = name+"-heap", about+", page files off", false, true
			}
			out = append(out, sc)
		}
	}
	return out
}

// tlsScenarios are the rows over TLS, on tradergate and nginx with the
// same certificate: the hits on the transaction and the 20-item page,
// identity and gzip, over HTTP/2 and HTTPS/1.1 (h2load), then a
// connection per request on the transaction, a full handshake each and
// a resumed one each.
func tlsScenarios(f fixture.Fixtures) []*scenario {
	var out []*scenario
	servers := []serverKind{kindTradergate, kindNginx}
	for _, pr := range []struct {
		p     proto
		name  string
		about string
	}{{protoH2, "h2", "HTTP/2 (h2load, 32 connections × 10 streams)"}, {protoH1TLS, "h1", "HTTPS/1.1 (h2load, 32 keep-alive connections)"}} {
		for _, p := range hitPages(f)[:2] {
			for _, gz := range []bool{false, true} {
				sc := &scenario{
					name: "tls-" + pr.name + "-hit-" + p.name, about: "cache hit over " + pr.about + ", " + p.about, gzip: gz,
					mode: load.ModeList, urls: []string{p.url}, hit: true, proto: pr.p, servers: servers,
				}
				if gz {
					sc.name += "-gzip"
					sc.about += ", Accept-Encoding: gzip"
				}
				out = append(out, sc)
			}
		}
	}
	tx := hitPages(f)[0].url
	return append(out, &scenario{
		name: "tls-new-conn", about: "a new TLS 1.3 connection per request: full handshake (ECDSA P-256, X25519), one HTTPS/1.1 cache hit on the transaction, close",
		mode: load.ModeList, urls: []string{tx}, hit: true, proto: protoNewConn, servers: servers,
	}, &scenario{
		name: "tls-resumed", about: "as tls-new-conn, every handshake after each connection's first resuming a session (TLS 1.3 session ticket, PSK with ECDHE)",
		mode: load.ModeList, urls: []string{tx}, hit: true, proto: protoResumed, servers: servers,
	})
}

// idleSettle is how long the idle rows' connections idle, every one
// open, before the server's memory is read: below every server's idle
// timeout.
const idleSettle = 5 * time.Second

// idleScenarios are the idle rows, on tradergate and nginx with the same
// certificate: conns TLS connections to a fresh server, each making one
// request for the transaction and then idling, over HTTP/1.1 and over
// HTTP/2; the server's resident memory grows by what they hold
// (idleVerdict).
func idleScenarios(f fixture.Fixtures, conns int) []*scenario {
	tx := hitPages(f)[0].url
	var out []*scenario
	for _, p := range []struct {
		p          proto
		name, what string
	}{{protoIdleH1, "idle-h1", "HTTPS/1.1"}, {protoIdleH2, "idle-h2", "HTTP/2"}} {
		out = append(out, &scenario{
			name: p.name, about: strconv.Itoa(conns) + " TLS connections (" + p.what + ") to a fresh server, each making one request (a hit on the transaction) and then idling " + idleSettle.String() + ": the server's RSS growth per connection",
			mode: load.ModeIdle, urls: []string{tx}, hit: true, proto: p.p, conns: conns,
			servers: []serverKind{kindTradergate, kindNginx},
		})
	}
	return out
}

// wanted reports whether sc runs with -only: selected, and an opt-in
// scenario only when -only is given.
func wanted(sc *scenario, only string) bool {
	return selected(sc.name, only) && (!sc.optIn || only != "")
}

// bigZipfTemplates are the settled 5-item activity pages of the big Zipf
// rows: every wallet, upper bounds a second apart back from the settled
// bound.
func bigZipfTemplates(f fixture.Fixtures) ([]string, int64) {
	var tmpl []string
	for _, w := range f.Wallets {
		tmpl = append(tmpl, "/v1/trader/"+w+"/activity?toTimestamp={n}&limit=5")
	}
	return tmpl, f.End - settledAge
}

// bigZipfKeys are zipf100k's pages: at about 5 KB with a gzip copy they
// take half of its 1 GiB cache, so none is evicted.
const bigZipfKeys = 100_000

// stampedeURLs gives each round a key of its own; every row starts a fresh
// server, so each is cold.
func stampedeURLs(f fixture.Fixtures, rounds int) []string {
	out := make([]string, rounds)
	for r := range out {
		w := f.Wallets[r%len(f.Wallets)]
		out[r] = "/v1/trader/" + w + "/activity?toTimestamp=" + strconv.FormatInt(f.End-2*settledAge-int64(r), 10) + "&limit=20"
	}
	return out
}

// zipfKeys builds the key universe of the Zipf mix: n distinct valid
// requests, shuffled by seed so that popularity does not follow kind.
// Shares (of n): transactions 20% (immutable once found), settled activity
// ranges 30% and settled order book pages 30% (immutable), activity first
// pages 10% and open positions 10% (fresh: 1s TTL). The transactions the
// simulated host has cap their share; settled activity ranges fill the
// rest.
func zipfKeys(f fixture.Fixtures, n int, seed uint64) []string {
	nw, nt := len(f.Wallets), len(f.Tokens)
	txs := append(append([]string(nil), f.TradeTxs...), f.ComboTxs...)
	nTx := min(n*20/100, len(txs))
	nHead, nOpen, nBook := n*10/100, n*10/100, n*30/100
	nRange := n - nTx - nHead - nOpen - nBook
	keys := make([]string, 0, n)
	for _, tx := range txs[:nTx] {
		keys = append(keys, "/v1/tx/"+tx)
	}
	// Ten-minute steps back from the settled bound: 3000 ranges over 16
	// wallets reach about 31 hours into the 72 the host holds.
	for i := range nRange {
		to := f.End - settledAge - int64(i/nw)*600
		keys = append(keys, "/v1/trader/"+f.Wallets[i%nw]+"/activity?toTimestamp="+strconv.FormatInt(to, 10)+"&limit=20")
	}
	for i := range nBook {
		to := (f.End - settledAge - int64(i/nt)*600) * 1000
		keys = append(keys, "/v1/orderbook/events?tokenId="+f.Tokens[i%nt]+"&to="+strconv.FormatInt(to, 10)+"&limit=100")
	}
	// Page sizes 1, 2, 3... make distinct first pages (variant A allows up
	// to 100; beyond that the extra keys wrap onto the same pages).
	for i := range nHead {
		keys = append(keys, "/v1/trader/"+f.Wallets[i%nw]+"/activity?limit="+strconv.Itoa(1+i/nw%100))
	}
	for i := range nOpen {
		keys = append(keys, "/v1/trader/"+f.Wallets[i%nw]+"/positions/open?limit="+strconv.Itoa(1+i/nw%100))
	}
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return keys
}

// selected reports whether a scenario passes the -only filter: a
// comma-separated list of name prefixes ("hit" selects every hit scenario,
// "hit-activity20" that page's identity, gzip and Redis rows).
func selected(name, only string) bool {
	if only == "" {
		return true
	}
	for p := range strings.SplitSeq(only, ",") {
		if p = strings.TrimSpace(p); p != "" && strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
