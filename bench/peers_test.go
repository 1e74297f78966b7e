package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tradergate/bench/load"
	"tradergate/proxy/config"
)

// TestPeerAndTLSScenarios checks the rows the peers, TLS and the fleet
// add: who runs them and how their load is made.
func TestPeerAndTLSScenarios(t *testing.T) {
	f := testFixtures()
	scs := buildScenarios(f, scenarioOptions{zipfKeys: 1000, firstGzipPages: 500, l2Pages: 300, stampedeRounds: 4, stampedeConns: 256, seed: 1, idleConns: 5000})
	for _, name := range []string{"miss", "miss-full"} {
		sc := scenarioByName(scs, name)
		if !slices.Contains(sc.servers, kindNginxTuned) || !slices.Contains(sc.servers, kindVarnish) {
			t.Errorf("%s does not run on nginx-tuned and varnish: %v", name, sc.servers)
		}
	}
	for _, sc := range scs {
		if strings.HasPrefix(sc.name, "idle-") {
			continue // below
		}
		if !strings.HasPrefix(sc.name, "tls-") {
			if sc.proto != protoHTTP {
				t.Errorf("%s: proto %q", sc.name, sc.proto)
			}
			continue
		}
		if !sc.proto.tls() || !sc.hit || !slices.Equal(sc.servers, []serverKind{kindTradergate, kindNginx}) || len(sc.urls) != 1 || !sc.variant("").tls {
			t.Errorf("%s: %+v", sc.name, sc)
		}
		if h2 := strings.HasPrefix(sc.name, "tls-h2-"); h2 != (sc.proto == protoH2) {
			t.Errorf("%s: proto %q", sc.name, sc.proto)
		}
		if strings.HasSuffix(sc.name, "-gzip") != sc.gzip {
			t.Errorf("%s: gzip %v", sc.name, sc.gzip)
		}
	}
	if r := scenarioByName(scs, "tls-resumed"); r.proto != protoResumed || r.proto.h2load() || r.urls[0] != "/v1/tx/"+f.TradeTxs[0] {
		t.Errorf("tls-resumed %+v", r)
	}
	l2 := scenarioByName(scs, "fleet-l2-hit")
	if !l2.redis || !l2.fromOtherReplica || l2.prefill != 300 || l2.count != 300 || !l2.hit || l2.gzip || l2.label() != labelRedis {
		t.Errorf("fleet-l2-hit %+v", l2)
	}
	if m := scenarioByName(scs, "fleet-l2-miss"); !m.redis || m.fromOtherReplica || m.prefill != 0 || m.mode != load.ModeSequence || m.base != "miss" {
		t.Errorf("fleet-l2-miss %+v", m)
	}
	for name, want := range map[string]bool{"tls-h2-hit-tx": true, "tls-new-conn": true, "fleet-l2-hit": true, "hit-tx": false} {
		if got := selected(name, "tls,fleet"); got != want {
			t.Errorf("selected(%q, tls,fleet) = %v", name, got)
		}
	}

	// The load of each kind of TLS row.
	b := &bench{opt: options{warmup: time.Second, duration: 3 * time.Second, connections: 32}, clientKey: "k", upstream: &server{addr: "127.0.0.1:1"},
		h2load: "/usr/bin/h2load", cert: certFiles{cert: "/tmp/c.pem", key: "/tmp/k.pem"}, redisSrv: &server{addr: "127.0.0.1:6"}}
	srv := &server{addr: "127.0.0.1:2", tls: true, proc: &proc{cmd: &exec.Cmd{Process: &os.Process{Pid: 42}}}}
	s := b.spec(scenarioByName(scs, "tls-h2-hit-activity20-gzip"), kindTradergate, srv, "")
	want := "/usr/bin/h2load -c 32 -m 10 -D 3000ms --warm-up-time 1000ms -H Authorization: Bearer k -H User-Agent: tradergate-bench -H Accept-Encoding: gzip https://127.0.0.1:2" + hitPages(f)[1].url
	if s.Mode != load.ModeH2load || strings.Join(s.Command, " ") != want || s.CheckCache != "" || s.TLS != nil || s.RedisAddr != "" {
		t.Fatalf("h2 spec: %q, check %q", strings.Join(s.Command, " "), s.CheckCache)
	}
	s = b.spec(scenarioByName(scs, "tls-h1-hit-tx"), kindNginx, srv, "")
	if got := strings.Join(s.Command, " "); !strings.Contains(got, " -m 1 ") || !strings.Contains(got, " --h1 ") || !strings.Contains(got, "-H Accept-Encoding: identity") {
		t.Fatalf("HTTPS/1.1 identity command %q", got)
	}
	s = b.spec(scenarioByName(scs, "tls-resumed"), kindTradergate, srv, "")
	if s.Mode != load.ModeList || s.TLS == nil || !s.TLS.NewConnection || !s.TLS.Resume || s.TLS.CAFile != "/tmp/c.pem" || s.TLS.ServerName != tlsServerName || s.CheckCache != "HIT" {
		t.Fatalf("resumed spec %+v %+v", s, s.TLS)
	}
	if s := b.spec(scenarioByName(scs, "tls-new-conn"), kindNginx, srv, ""); s.TLS.Resume || !s.TLS.NewConnection {
		t.Fatalf("new connection spec %+v", s.TLS)
	}
	if s := b.spec(scenarioByName(scs, "fleet-l2-miss"), kindTradergate, srv, ""); s.RedisAddr != "127.0.0.1:6" {
		t.Fatalf("fleet spec reads no Redis: %+v", s)
	}

	// The idle rows: 5,000 TLS connections by default, HTTP/1.1 and
	// HTTP/2, on tradergate (with room for them above its cap) and nginx.
	for _, name := range []string{"idle-h1", "idle-h2"} {
		sc := scenarioByName(scs, name)
		if sc.mode != load.ModeIdle || sc.conns != 5000 || !sc.proto.tls() || sc.proto.h2load() || !slices.Equal(sc.servers, []serverKind{kindTradergate, kindNginx}) {
			t.Errorf("%s: %+v", name, sc)
		}
		if v := sc.variant(""); !v.tls || v.maxConns != 5000 {
			t.Errorf("%s: tradergate variant %+v", name, v)
		}
		s := b.spec(sc, kindNginx, srv, "")
		if s.Mode != load.ModeIdle || s.Connections != 5000 || s.TLS == nil || s.TLS.HTTP2 != (name == "idle-h2") || s.TLS.NewConnection ||
			s.Duration != idleSettle || s.Warmup != 0 || s.ServerPGID != 42 || s.URLs[0] != "/v1/tx/"+f.TradeTxs[0] {
			t.Errorf("%s: spec %+v %+v", name, s, s.TLS)
		}
	}
	if !selected("idle-h2", "idle") || selected("tls-h2-hit-tx", "idle") {
		t.Error("-only idle selects the idle rows alone")
	}
}

func TestMissingTool(t *testing.T) {
	scs := buildScenarios(testFixtures(), scenarioOptions{zipfKeys: 1000, firstGzipPages: 500, l2Pages: 300, stampedeRounds: 4, stampedeConns: 256, seed: 1})
	none := &bench{}
	all := &bench{nginx: "/n", varnish: "/v", h2load: "/h", redis: "/r"}
	idle := &scenario{name: "idle-h1", mode: load.ModeIdle, conns: 5000}
	if got := (&bench{nofile: 4096}).missingTool(idle, kindTradergate); !strings.Contains(got, "open file limit (hard, 4096)") {
		t.Errorf("idle row under a low file limit: %q", got)
	}
	if got := (&bench{nofile: 20000}).missingTool(idle, kindTradergate); got != "" {
		t.Errorf("idle row under a file limit of 20000: %q", got)
	}
	for _, tc := range []struct {
		sc   string
		kind serverKind
		want string
	}{
		{"hit-tx", kindNginxTuned, "apt-get install nginx-light"},
		{"hit-tx", kindVarnish, "apt-get install varnish"},
		{"tls-h2-hit-tx", kindTradergate, "apt-get install nghttp2-client"},
		{"tls-new-conn", kindTradergate, ""}, // the load generator's own TLS
		{"fleet-l2-hit", kindTradergate, "apt-get install redis-server"},
		{"hit-tx", kindTradergate, ""},
	} {
		if got := none.missingTool(scenarioByName(scs, tc.sc), tc.kind); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s on %s with nothing installed: %q, want %q", tc.sc, tc.kind, got, tc.want)
		}
		if got := all.missingTool(scenarioByName(scs, tc.sc), tc.kind); got != "" {
			t.Errorf("%s on %s with everything installed: %q", tc.sc, tc.kind, got)
		}
	}
}

func TestRenderNginxConf(t *testing.T) {
	c := nginxConf{Prefix: "/p", Listen: "127.0.0.1:8", Upstream: "127.0.0.1:9", UpstreamKey: "sim"}
	plain, err := renderNginxConf(c)
	if err != nil {
		t.Fatal(err)
	}
	c.Tuned, c.TLS, c.CertFile, c.KeyFile = true, true, "/c.pem", "/k.pem"
	tuned, err := renderNginxConf(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"open_file_cache max=1000 inactive=60s;", "open_file_cache_valid 60s;", "listen 127.0.0.1:8 ssl http2 backlog=4096;", "ssl_certificate     /c.pem;", "ssl_certificate_key /k.pem;", "ssl_protocols TLSv1.2 TLSv1.3;"} {
		if !bytes.Contains(tuned, []byte(d)) {
			t.Errorf("tuned TLS conf lacks %q", d)
		}
		if bytes.Contains(plain, []byte(d)) {
			t.Errorf("plain conf has %q", d)
		}
	}
	for _, d := range []string{"listen 127.0.0.1:8 backlog=4096;", "proxy_cache_key $request_uri;", `proxy_set_header Authorization "Bearer sim";`} {
		if !bytes.Contains(plain, []byte(d)) {
			t.Errorf("plain conf lacks %q", d)
		}
	}
	if _, err := exec.LookPath("nginx"); err == nil {
		checkNginxSyntax(t)
	}
}

// checkNginxSyntax has the installed nginx test the rendered confs
// (nginx -t), plain and tuned with TLS, with a throwaway prefix and
// certificate.
func checkNginxSyntax(t *testing.T) {
	t.Helper()
	dir := worldReadableDir(t)
	for _, d := range []string{"cache", "tmp", "logs"} {
		if err := os.MkdirAll(dir+"/"+d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := makeCert(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tuned := range []bool{false, true} {
		conf, err := renderNginxConf(nginxConf{Prefix: dir, Listen: "127.0.0.1:1", Upstream: "127.0.0.1:2", UpstreamKey: "k", Tuned: tuned, TLS: tuned, CertFile: cert.cert, KeyFile: cert.key})
		if err != nil {
			t.Fatal(err)
		}
		path := dir + "/nginx.conf"
		if err := os.WriteFile(path, conf, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("nginx", "-t", "-p", dir, "-c", path, "-e", "stderr").CombinedOutput(); err != nil {
			t.Errorf("nginx -t (tuned and TLS %v): %v\n%s", tuned, err, out)
		}
	}
}

func TestRenderVarnishVCL(t *testing.T) {
	vcl, err := renderVarnishVCL(varnishVCL{UpstreamHost: "127.0.0.1", UpstreamPort: "9", UpstreamKey: "sim"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"vcl 4.1;", `.host = "127.0.0.1";`, `.port = "9";`,
		// Cached despite Authorization, keyed as nginx's $request_uri.
		"return (hash);", "hash_data(req.url);",
		`set bereq.url = "/open-api" + bereq.url;`, `set bereq.http.Authorization = "Bearer sim";`,
		"set beresp.ttl = 1s;",
	} {
		if !bytes.Contains(vcl, []byte(want)) {
			t.Errorf("VCL lacks %q:\n%s", want, vcl)
		}
	}
	// The builtin vcl_hash adds the host; the VCL must end its own.
	if !bytes.Contains(vcl, []byte("hash_data(req.url);\n    return (lookup);")) {
		t.Error("vcl_hash falls through to the builtin, which hashes the host too")
	}
	if got := strings.Join(varnishArgs("127.0.0.1:8", "/x.vcl", "/w"), " "); got != "-F -a 127.0.0.1:8 -f /x.vcl -s malloc,256m -n /w -p http_gzip_support=off" {
		t.Errorf("varnishd args %q", got)
	}
	if _, err := exec.LookPath("varnishd"); err == nil {
		// varnishd -C compiles the VCL and prints the C: a syntax check.
		dir := worldReadableDir(t)
		path := dir + "/bench.vcl"
		if err := os.WriteFile(path, vcl, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("varnishd", "-C", "-f", path, "-n", dir+"/work").CombinedOutput(); err != nil {
			t.Errorf("varnishd -C: %v\n%.2000s", err, out)
		}
	}
}

func TestRenderTGConfigTLS(t *testing.T) {
	dir := t.TempDir()
	cert, err := makeCert(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	data, err := renderTGConfig(tgConfig{Port: 1, AdminPort: 2, UpstreamURL: "http://127.0.0.1:3/open-api", KeySHA256: hashKey("k"), CacheMaxBytes: defaultCacheBytes, CertFile: cert.cert, KeyFile: cert.key})
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(data)
	if err != nil {
		t.Fatalf("tradergate refuses the TLS config: %v\n%s", err, data)
	}
	if tl := c.Server.TLS; tl.Mode != "files" || tl.CertFile != cert.cert || tl.KeyFile != cert.key || tl.HTTPListen == nil || *tl.HTTPListen != "" {
		t.Fatalf("server.tls %+v", tl)
	}
	// The certificate is ECDSA P-256 for the name the clients check.
	tc, err := tlsClientConfig(cert)
	if err != nil {
		t.Fatal(err)
	}
	if tc.ServerName != tlsServerName || len(tc.RootCAs.Subjects()) != 1 { //nolint:staticcheck // a pool built here, not the system's
		t.Fatalf("client config %+v", tc)
	}
}

// worldReadableDir is a temp dir that servers run as root can still read
// after they drop to their own user, as the harness's temp dir is.
func worldReadableDir(t *testing.T) string {
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestPeerTargets(t *testing.T) {
	rows := []row{
		// Plain hits: tx below both peers; activity20's gzip row not
		// below Varnish; the order book not run on the peers.
		{Scenario: "hit-tx", Server: kindTradergate, CPUus: 30, Requests: 1},
		{Scenario: "hit-tx", Server: kindNginxTuned, CPUus: 31, Requests: 1},
		{Scenario: "hit-tx", Server: kindVarnish, CPUus: 40, Requests: 1},
		{Scenario: "hit-tx-gzip", Server: kindTradergate, CPUus: 30, Requests: 1},
		{Scenario: "hit-tx-gzip", Server: kindNginxTuned, CPUus: 31, Requests: 1},
		{Scenario: "hit-tx-gzip", Server: kindVarnish, CPUus: 40, Requests: 1},
		{Scenario: "hit-activity20", Server: kindTradergate, CPUus: 40, Requests: 1},
		{Scenario: "hit-activity20", Server: kindNginxTuned, CPUus: 45, Requests: 1},
		{Scenario: "hit-activity20", Server: kindVarnish, CPUus: 50, Requests: 1},
		{Scenario: "hit-activity20-gzip", Server: kindTradergate, CPUus: 40, Requests: 1},
		{Scenario: "hit-activity20-gzip", Server: kindNginxTuned, CPUus: 45, Requests: 1},
		{Scenario: "hit-activity20-gzip", Server: kindVarnish, CPUus: 40, Requests: 1},
		// The order book's gzip hit: 125 is exactly 1.25 × 100.
		{Scenario: "hit-orderbook1000-gzip", Server: kindTradergate, CPUus: 125, Requests: 1},
		{Scenario: "hit-orderbook1000-gzip", Server: kindCeilingFast, CPUus: 100, Requests: 1},
		// HTTP/2: tx equal to nginx (at most: passes); activity20 above.
		{Scenario: "tls-h2-hit-tx", Server: kindTradergate, CPUus: 50, Requests: 1},
		{Scenario: "tls-h2-hit-tx", Server: kindNginx, CPUus: 50, Requests: 1},
		{Scenario: "tls-h2-hit-tx-gzip", Server: kindTradergate, CPUus: 49, Requests: 1},
		{Scenario: "tls-h2-hit-tx-gzip", Server: kindNginx, CPUus: 50, Requests: 1},
		{Scenario: "tls-h2-hit-activity20", Server: kindTradergate, CPUus: 70, Requests: 1},
		{Scenario: "tls-h2-hit-activity20", Server: kindNginx, CPUus: 60, Requests: 1},
		{Scenario: "tls-h2-hit-activity20-gzip", Server: kindTradergate, CPUus: 50, Requests: 1},
		{Scenario: "tls-h2-hit-activity20-gzip", Server: kindNginx, CPUus: 60, Requests: 1},
		// HTTPS/1.1: tx equal (not below: fails); activity20 not run.
		{Scenario: "tls-h1-hit-tx", Server: kindTradergate, CPUus: 40, Requests: 1},
		{Scenario: "tls-h1-hit-tx", Server: kindNginx, CPUus: 40, Requests: 1},
		{Scenario: "tls-h1-hit-tx-gzip", Server: kindTradergate, CPUus: 30, Requests: 1},
		{Scenario: "tls-h1-hit-tx-gzip", Server: kindNginx, CPUus: 40, Requests: 1},
		{Scenario: "tls-new-conn", Server: kindTradergate, CPUus: 400, Requests: 1},
		{Scenario: "tls-new-conn", Server: kindNginx, CPUus: 420, Requests: 1},
		{Scenario: "tls-resumed", Server: kindTradergate, CPUus: 200, Requests: 1, Handshakes: 1000, Resumed: 990},
		// The fleet: 1.5 × 40 = 60 passes on CPU, but 1.2 commands a hit
		// is over the bound.
		{Scenario: "hit-activity20-redis", Server: kindTradergate, Label: labelRedis, CPUus: 60, Requests: 1, RedisPerReq: 1.2, RedisCalls: map[string]int64{"evalsha": 12}},
		{Scenario: "fleet-l2-hit", Server: kindTradergate, Label: labelRedis, CPUus: 80, Requests: 1, RedisPerReq: 2, RedisCalls: map[string]int64{"get": 2}, Upstream: 0},
	}
	vs := peerVerdicts(rows)
	// orderbook-gzip vs ceiling; tx, activity20, orderbook1000 against
	// nginx-tuned and Varnish; HTTP/2 tx, activity20; HTTPS/1.1 tx,
	// activity20; new connection; resumed; Redis hit; fleet; idle.
	checkVerdicts(t, vs, "PASS PASS PASS PASS FAIL n/a n/a PASS FAIL FAIL n/a PASS info FAIL info n/a", map[int]string{
		4:  "hit-activity20-gzip: 40.0 vs 40.0 CPU µs (×1.00)",
		8:  "tls-h2-hit-activity20: 70.0 vs 60.0",
		9:  "tls-h1-hit-tx: 40.0 vs 40.0 CPU µs (×1.00)",
		12: "tradergate 200.0 CPU µs, 990 of 1000 handshakes resumed, full handshake 400.0 (×0.50)",
		13: "60.0 vs 40.0 CPU µs (×1.50); 1.20 Redis commands per response",
		14: "fleet-l2-hit 80.0 CPU µs, 2.00 Redis commands, 0 upstream calls; hit-activity20 40.0 (×2.00)",
	})
	// Within both bounds, the Redis hit passes; without its commands read,
	// it is not judged.
	rows[29].RedisPerReq = 1
	if v := peerVerdicts(rows)[13]; v.Status != "PASS" {
		t.Errorf("Redis hit within bounds: %+v", v)
	}
	rows[29].RedisCalls = nil
	if v := peerVerdicts(rows)[13]; v.Status != "n/a" {
		t.Errorf("Redis hit without its commands: %+v", v)
	}
	// Every target has its line in the full list.
	if n := len(checkTargets(rows)); n != 16+len(vs)+len(latencyVerdicts(nil))+1 { // the latency lines, then the sweep's line last
		t.Errorf("%d verdicts", n)
	}
}

// The idle target: tradergate at most 20 KB per idle connection on both
// rows, nginx beside it; one row over fails it, one row missing leaves
// it unjudged unless the other fails.
func TestIdleVerdict(t *testing.T) {
	rows := []row{
		{Scenario: "idle-h1", Server: kindTradergate, Requests: 5000, IdleConns: 5000, IdlePerConn: 19_000},
		{Scenario: "idle-h1", Server: kindNginx, Requests: 5000, IdleConns: 5000, IdlePerConn: 15_200},
		{Scenario: "idle-h2", Server: kindTradergate, Requests: 5000, IdleConns: 4990, IdlePerConn: 20_000},
	}
	v := idleVerdict(rows)
	want := "idle-h1: 19.0 KB (18.6 KiB) per connection (5000 connections), nginx 15.2 KB (14.8 KiB) (×1.2); idle-h2: 20.0 KB (19.5 KiB) per connection (4990 connections)"
	if v.Status != "PASS" || v.Detail != want {
		t.Errorf("within the bound: %+v", v)
	}
	rows[2].IdlePerConn = 20_001
	if v := idleVerdict(rows); v.Status != "FAIL" {
		t.Errorf("idle-h2 over the bound: %+v", v)
	}
	if v := idleVerdict(rows[:2]); v.Status != "n/a" {
		t.Errorf("idle-h2 not run: %+v", v)
	}
	rows[0].IdlePerConn = 70_000
	if v := idleVerdict(rows[:2]); v.Status != "FAIL" {
		t.Errorf("idle-h1 over the bound, idle-h2 not run: %+v", v)
	}
	// A row's figures come from the load generator's result.
	var r row
	r.fill(&scenario{name: "idle-h1", mode: load.ModeIdle, proto: protoIdleH1}, &load.Result{Requests: 1000, Status: map[int]int64{200: 1000},
		IdleConns: 1000, IdleRSSBefore: 20 << 20, ServerRSS: 20<<20 + 1000*30_000, RSSMeasured: true}, 100)
	if r.IdleConns != 1000 || r.IdlePerConn != 30_000 || !strings.Contains(strings.Join(r.Notes, "; "), "1000 idle connections: RSS 20 MiB before the first opened, 49 MiB with all of them idle: 30.0 KB (29.3 KiB) per connection") {
		t.Errorf("row %+v", r)
	}
}

func TestProtocolNotes(t *testing.T) {
	res := &load.Result{
		Requests: 1000, RPS: 1000, Protocol: "http/1.1", Status: map[int]int64{200: 1000},
		Latency:       load.Latency{Mean: 900 * time.Microsecond, Max: 12 * time.Millisecond},
		RedisCalls:    map[string]int64{"evalsha": 1000, "get": 20, "set": 20},
		RedisMeasured: true,
	}
	var r row
	r.Server = kindTradergate
	r.fill(&scenario{name: "tls-h2-hit-tx", mode: load.ModeList, hit: true, proto: protoH2, redis: true}, res, 100)
	notes := strings.Join(r.Notes, "; ")
	for _, want := range []string{
		"h2load over http/1.1: mean 900µs, max 12.00ms per request",
		`PROTOCOL: h2load negotiated "http/1.1", not "h2"`,
		"redis: 1.04 commands per response (evalsha 1.00, get 0.02, set 0.02)",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes %q lack %q", notes, want)
		}
	}
	if r.RedisPerReq != 1.04 || r.P50us != 0 {
		t.Errorf("redis %v, p50 %v (h2load has no percentiles)", r.RedisPerReq, r.P50us)
	}

	var c row
	c.Server = kindNginx
	c.fill(&scenario{name: "tls-resumed", mode: load.ModeList, proto: protoResumed}, &load.Result{Requests: 500, Handshakes: 500, Resumed: 468}, 100)
	if n := strings.Join(c.Notes, "; "); !strings.Contains(n, "500 TLS handshakes in the window, 468 resumed (93.6%)") || c.Resumed != 468 {
		t.Errorf("handshake notes %q", n)
	}
}

func TestParseServers(t *testing.T) {
	got, err := parseServers(" tradergate,nginx-tuned,,varnish ")
	if err != nil || !slices.Equal(got, []serverKind{kindTradergate, kindNginxTuned, kindVarnish}) {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := parseServers(""); err != nil || got != nil {
		t.Fatalf("empty: %v %v", got, err)
	}
	if _, err := parseServers("nginx,apache"); err == nil || !strings.Contains(err.Error(), `"apache"`) {
		t.Fatalf("err = %v", err)
	}
	b := &bench{opt: options{servers: []serverKind{kindVarnish}}, nginx: "/n", varnish: "/v"}
	scs := buildScenarios(testFixtures(), scenarioOptions{zipfKeys: 1000, firstGzipPages: 500, l2Pages: 300, stampedeRounds: 4, stampedeConns: 256, seed: 1})
	rows := b.plan([]*scenario{scenarioByName(scs, "hit-tx"), scenarioByName(scs, "tls-h2-hit-tx")})
	if len(rows) != 1 || rows[0].Server != kindVarnish || rows[0].Scenario != "hit-tx" {
		t.Fatalf("planned %+v", rows)
	}
}

func TestToolVersion(t *testing.T) {
	path, v := toolVersion("go", "go version ", "version")
	if path == "" || !strings.HasPrefix(v, "go1.") {
		t.Fatalf("go: %q %q", path, v)
	}
	if path, v := toolVersion("tradergate-bench-no-such-tool", "", "-v"); path != "" || v != "" {
		t.Fatalf("a missing tool: %q %q", path, v)
	}
}

// TestServerStopRemovesScratch: a stopped server's own directory (nginx's
// cache files) goes with it, so that a later row does not start on a
// machine with gigabytes of an earlier row's files on tmpfs.
func TestServerStopRemovesScratch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nginx-1")
	if err := os.MkdirAll(filepath.Join(dir, "cache", "a", "bc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cache", "a", "bc", "page"), []byte("cached"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &server{addr: "127.0.0.1:1", scratch: dir}
	s.stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("scratch directory left after stop: %v", err)
	}
	s.stop()              // twice: nothing left to remove, no panic
	(*server)(nil).stop() // a server that never started
}

// A peer that fails to start leaves no directory behind in the run's
// scratch directory: nginx's, Varnish's and Nchan's are removed at once,
// not at the end of the run.
func TestFailedStartLeavesNoScratch(t *testing.T) {
	scratch := t.TempDir()
	missing := filepath.Join(t.TempDir(), "not-installed")
	b := &bench{tmp: scratch, out: t.TempDir(), nginx: missing, varnish: missing, simKey: "k", upstream: &server{addr: "127.0.0.1:1"}}
	b.procs = newProcs(t.TempDir(), t.TempDir(), 0)
	ctx := t.Context()
	if srv, err := b.startNginx(ctx, false, false, 0); err == nil {
		srv.stop()
		t.Error("nginx started from a missing binary")
	}
	if srv, err := b.startVarnish(ctx); err == nil {
		srv.stop()
		t.Error("Varnish started from a missing binary")
	}
	if ft, err := b.startNchan(ctx, 1, &server{addr: "127.0.0.1:1"}, "token", missing); err == nil {
		ft.stop()
		t.Error("Nchan started from a missing binary")
	}
	left, err := os.ReadDir(scratch)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left in the scratch directory: %s", e.Name())
	}
}
