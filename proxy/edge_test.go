package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"tradergate/internal/testkit"
	"tradergate/legacysim"
	"tradergate/proxy"
	"tradergate/proxy/config"
)

// Keys of the test edge, in plain text here only.
const (
	keyAll    = "test-key-all-routes"
	keyTxOnly = "test-key-tx-only"
	legacyKey = "legacy-secret-of-the-edge"
)

// edge is tradergate in front of legacysim, both on loopback: legacysim on
// an httptest server, the edge through Server.Serve on its own front, as
// main runs it.
type edge struct {
	t     testing.TB
	sim   *legacysim.Sim
	up    *httptest.Server
	srv   *proxy.Server
	front *frontEnd
	cfg   *config.Config
	// addr is the client listener; stop ends Serve, wait returns what it
	// returned.
	addr string
	stop context.CancelFunc
	wait func() error
}

// frontEnd is where a test sends its requests, and with which client.
type frontEnd struct {
	URL    string
	client *http.Client
}

func (f *frontEnd) Client() *http.Client { return f.client }

// edgeSetup is what options may change before the edge is built.
type edgeSetup struct {
	sim  legacysim.Config
	wrap func(http.Handler) http.Handler // around legacysim
	now  func() time.Time                // the edge's clock
	cfg  []func(*config.Config)
	env  map[string]string
	// logger and accessLog are the edge's log options.
	logger    *slog.Logger
	accessLog bool
	// shared, when set, is the legacy host of another edge: replicas of
	// one fleet call the same one.
	shared *edge
	// spans, when set, receives the edge's trace spans.
	spans sdktrace.SpanProcessor
}

type edgeOption func(*edgeSetup)

// withConfig edits the parsed configuration before it is validated.
func withConfig(f func(*config.Config)) edgeOption {
	return func(s *edgeSetup) { s.cfg = append(s.cfg, f) }
}

// withSim sets legacysim's configuration (its Key is always legacyKey).
func withSim(c legacysim.Config) edgeOption { return func(s *edgeSetup) { s.sim = c } }

// withUpstream wraps legacysim, to hold or observe requests.
func withUpstream(wrap func(http.Handler) http.Handler) edgeOption {
	return func(s *edgeSetup) { s.wrap = wrap }
}

// withEnv sets an environment variable as the edge sees it.
func withEnv(name, value string) edgeOption { return func(s *edgeSetup) { s.env[name] = value } }

// withUpstreamOf makes the edge call the legacy host of another: replicas
// of one fleet.
func withUpstreamOf(e *edge) edgeOption { return func(s *edgeSetup) { s.shared = e } }

// withClock gives the edge a clock the test moves.
func withClock(now func() time.Time) edgeOption { return func(s *edgeSetup) { s.now = now } }

func testConfig(baseURL string) string {
	return `
server:
  listen: "127.0.0.1:0"
admin:
  listen: "off"
upstream:
  base_url: "` + baseURL + `"
  timeout: 15s
keys:
  - id: all
    sha256: "` + proxy.HashKey(keyAll) + `"
    plan: pro
    routes: ["*"]
  - id: txonly
    sha256: "` + proxy.HashKey(keyTxOnly) + `"
    plan: free
    routes: [tx]
plans:
  free: {requests: 60, window: 1m}
  pro: {requests: 100000, window: 1m}
`
}

func newEdge(t testing.TB, opts ...edgeOption) *edge {
	t.Helper()
	setup := edgeSetup{sim: legacysim.Config{Seed: 7}, env: map[string]string{
		"TRADERGATE_UPSTREAM_KEY": legacyKey,
		"WRONG_KEY_VAR":           "not-the-legacy-key",
	}}
	for _, o := range opts {
		o(&setup)
	}
	setup.sim.Key = legacyKey
	var sim *legacysim.Sim
	var up *httptest.Server
	if setup.shared != nil {
		sim, up = setup.shared.sim, setup.shared.up
	} else {
		sim = legacysim.New(setup.sim)
		var upstream http.Handler = sim
		if setup.wrap != nil {
			upstream = setup.wrap(sim)
		}
		up = httptest.NewServer(upstream)
		t.Cleanup(up.Close)
	}
	cfg, err := config.Parse([]byte(testConfig(up.URL + "/open-api")))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range setup.cfg {
		f(cfg)
	}
	if err := cfg.Validate(func(k string) string { return setup.env[k] }); err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(cfg, proxy.Options{Now: setup.now, Logger: setup.logger, AccessLog: setup.accessLog,
		Getenv: func(k string) string { return setup.env[k] }, SpanProcessor: setup.spans})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	e := &edge{t: t, sim: sim, up: up, srv: srv, cfg: cfg}
	e.addr, e.stop, e.wait = testkit.Serve(t, srv)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(client.CloseIdleConnections)
	e.front = &frontEnd{URL: "http://" + e.addr, client: client}
	return e
}

// get sends a GET with the all-routes key unless headers say otherwise.
func (e *edge) get(path string, headers ...string) (*http.Response, []byte) {
	e.t.Helper()
	return e.do(http.MethodGet, path, append([]string{"Authorization", "Bearer " + keyAll}, headers...)...)
}

func (e *edge) do(method, path string, headers ...string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.front.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.front.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, body
}

// legacy fetches what the legacy host answers to the request the edge last
// sent it: the input the rewrite must have worked from.
func (e *edge) legacy() []byte {
	e.t.Helper()
	recent := e.sim.Recent()
	if len(recent) == 0 {
		e.t.Fatal("no request reached the legacy host")
	}
	last := recent[len(recent)-1]
	req, _ := http.NewRequest(http.MethodGet, e.up.URL+last.Path+"?"+last.Query.Encode(), nil)
	req.Header.Set("Authorization", "Bearer "+legacyKey)
	resp, err := e.up.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}

// failure asserts a variant A failure body (docs/CONTRACT.md "Errors").
func failure(t *testing.T, resp *http.Response, body []byte, status int, msg string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("status = %d, want %d (body %s)", resp.StatusCode, status, body)
	}
	want := `{"message":` + jsonString(msg) + `,"status_code":"0","data":null}`
	if string(body) != want {
		t.Errorf("body = %s, want %s", body, want)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
}

func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("invalid JSON %q: %v", b, err)
	}
	return v
}

func TestAuthentication(t *testing.T) {
	e := newEdge(t)
	tx := "/v1/tx/" + e.sim.TradeTxs()[0]
	act := "/v1/trader/" + e.sim.Wallets()[0] + "/activity"
	tests := []struct {
		name, path, authz string
		status            int
		msg               string
	}{
		{"no header", tx, "", 401, "Missing or invalid API key"},
		{"unknown key", tx, "Bearer nope", 401, "Missing or invalid API key"},
		{"wrong scheme", tx, "Basic " + keyAll, 401, "Missing or invalid API key"},
		{"empty bearer", tx, "Bearer ", 401, "Missing or invalid API key"},
		{"huge key", tx, "Bearer " + strings.Repeat("k", 4000), 401, "Missing or invalid API key"},
		{"unknown path without key", "/v1/nothing", "", 401, "Missing or invalid API key"},
		{"route not allowed", act, "Bearer " + keyTxOnly, 403, "API key is not allowed to use this resource"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.sim.ResetStats()
			resp, body := e.do(http.MethodGet, tc.path, "Authorization", tc.authz)
			failure(t, resp, body, tc.status, tc.msg)
			if tc.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if n := e.sim.Stats().Requests; n != 0 {
				t.Errorf("%d requests reached the legacy host", n)
			}
		})
	}
	t.Run("scheme case-insensitive and allowed route", func(t *testing.T) {
		resp, body := e.do(http.MethodGet, tx, "Authorization", "bearer "+keyTxOnly)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
	})
}

func TestNotFoundAndMethod(t *testing.T) {
	e := newEdge(t)
	resp, body := e.get("/v1/nothing")
	failure(t, resp, body, 404, "Not found")
	resp, body = e.get("/v1/tx/" + e.sim.TradeTxs()[0] + "/")
	failure(t, resp, body, 404, "Not found")

	resp, body = e.do(http.MethodPost, "/v1/tx/"+e.sim.TradeTxs()[0], "Authorization", "Bearer "+keyAll)
	failure(t, resp, body, 405, "Method not allowed")
	if got := resp.Header.Get("Allow"); got != "GET, HEAD" {
		t.Errorf("Allow = %q", got)
	}

	resp, body = e.do(http.MethodHead, "/v1/tx/"+e.sim.TradeTxs()[0], "Authorization", "Bearer "+keyAll)
	if resp.StatusCode != 200 || len(body) != 0 || resp.Header.Get("Content-Length") == "0" {
		t.Errorf("HEAD: %d, %d body bytes, Content-Length %q", resp.StatusCode, len(body), resp.Header.Get("Content-Length"))
	}
}

func TestValidationNeverReachesUpstream(t *testing.T) {
	e := newEdge(t)
	w := e.sim.Wallets()[0]
	tests := []struct{ path, msg string }{
		{"/v1/orderbook/events", "tokenId, marketId, or conditionId is required"},
		{"/v1/orderbook/events?tokenId=1&limit=0", "Invalid limit: must be an integer from 1 to 10000"},
		{"/v1/orderbook/events?tokenId=1&from=9&to=1", "Invalid range: to must be >= from"},
		{"/v1/orderbook/events?tokenId=1&eventType=trade", "Invalid eventType: values must be book or price_change"},
		{"/v1/orderbook/events?tokenId=1&order=sideways", "Invalid order: must be asc or desc"},
		{"/v1/trader/0x12/activity", "Invalid address format"},
		{"/v1/trader/" + w + "/activity?limit=0", "Invalid limit: must be an integer from 1 to 100"},
		{"/v1/trader/" + w + "/deposits-withdrawals?type=gift", "Invalid type: must be deposit or withdrawal"},
		{"/v1/trader/" + w + "/positions/open?limit=101", "Invalid limit: must be an integer from 1 to 100"},
		{"/v1/tx/0x1234", "Invalid txHash format"},
		{"/v1/trader/wallet-address/0xnothex", "Invalid address format"},
	}
	for _, tc := range tests {
		resp, body := e.get(tc.path)
		failure(t, resp, body, 400, tc.msg)
	}
	if n := e.sim.Stats().Requests; n != 0 {
		t.Errorf("%d invalid requests reached the legacy host", n)
	}
}

func TestUpstreamGetsCanonicalRequest(t *testing.T) {
	e := newEdge(t)
	w := e.sim.Wallets()[0]
	upper := "0x" + strings.ToUpper(w[2:])
	tests := []struct {
		path, wantPath, wantQuery string
	}{
		// Activity: the legacy default is 50, variant A's 20: sent explicitly.
		{"/v1/trader/" + upper + "/activity?apiKey=x&foo=1", "/open-api/v1/trader/" + w + "/activity", "limit=20"},
		{"/v1/trader/" + w + "/activity?limit=1000", "/open-api/v1/trader/" + w + "/activity", "limit=100"},
		{"/v1/trader/" + w + "/deposits-withdrawals?type=Withdrawal", "/open-api/v1/trader/" + w + "/deposits-withdrawals", "limit=20&type=withdrawal"},
		{"/v1/trader/" + w + "/positions/open?marketIds=1", "/open-api/v1/trader/" + w + "/positions/open", "limit=20"},
		{"/v1/trader/" + w + "/positions/closed", "/open-api/v1/trader/" + w + "/positions/closed", "limit=20"},
		{"/v1/trader/" + w + "/combo-positions/closed", "/open-api/v1/trader/" + w + "/combo-positions/closed", "limit=20"},
		{"/v1/orderbook/events?tokenId=b,a&tokenId=a", "/open-api/v1/orderbook/events", "limit=1000&order=asc&tokenId=a%2Cb"},
		{"/v1/tx/0x" + strings.ToUpper(e.sim.TradeTxs()[0][2:]) + "?x=1", "/open-api/v1/tx/" + e.sim.TradeTxs()[0], ""},
	}
	for _, tc := range tests {
		e.get(tc.path, "X-Request-Id", "trace-12345678")
		recent := e.sim.Recent()
		last := recent[len(recent)-1]
		if last.Path != tc.wantPath || last.Query.Encode() != tc.wantQuery {
			t.Errorf("%s: upstream got %s?%s, want %s?%s", tc.path, last.Path, last.Query.Encode(), tc.wantPath, tc.wantQuery)
		}
		if got := last.Header.Get("Authorization"); got != "Bearer "+legacyKey {
			t.Errorf("upstream Authorization = %q, want the edge's own key", got)
		}
		if got := last.Header.Get("Accept-Encoding"); got != "gzip" {
			t.Errorf("upstream Accept-Encoding = %q, want gzip", got)
		}
		if got := last.Header.Get("X-Request-Id"); got != "trace-12345678" {
			t.Errorf("upstream X-Request-Id = %q", got)
		}
	}
}

func TestUpstreamErrors(t *testing.T) {
	tests := []struct {
		name       string
		faults     legacysim.Faults
		opts       []edgeOption
		status     int
		msg        string
		retryAfter string
	}{
		{"legacy 400 keeps its message", legacysim.Faults{FailStatus: 400}, nil, 400, "", ""},
		{"legacy 401 is our credential", legacysim.Faults{FailStatus: 401}, nil, 502, "Upstream rejected the gateway's credential", ""},
		{"legacy 403 is our credential", legacysim.Faults{FailStatus: 403}, nil, 502, "Upstream rejected the gateway's credential", ""},
		{"legacy 429 with Retry-After", legacysim.Faults{FailStatus: 429, RetryAfter: 7}, nil, 503, "Upstream rate limited", "7"},
		{"legacy 500", legacysim.Faults{FailStatus: 500}, nil, 502, "Upstream error", ""},
		{"legacy 503", legacysim.Faults{FailStatus: 503}, nil, 502, "Upstream error", ""},
		{"malformed body", legacysim.Faults{Malformed: true}, nil, 502, "Invalid upstream response", ""},
		{"truncated body", legacysim.Faults{Truncate: true}, nil, 502, "Upstream error", ""},
		{"body over the cap", legacysim.Faults{PadBytes: 8 << 10}, []edgeOption{withConfig(func(c *config.Config) { c.Upstream.MaxBodyBytes = 4 << 10 })}, 502, "Upstream response too large", ""},
		{"timeout", legacysim.Faults{Hang: true}, []edgeOption{withConfig(func(c *config.Config) { c.Upstream.Timeout = 200 * time.Millisecond })}, 504, "Upstream timeout", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEdge(t, tc.opts...)
			e.sim.SetFaults(tc.faults)
			resp, body := e.get("/v1/tx/" + e.sim.TradeTxs()[0])
			msg := tc.msg
			if msg == "" {
				// The legacy host's own words reach the client on a 400.
				var b struct{ Message string }
				_ = json.Unmarshal(e.legacy(), &b)
				msg = b.Message
				if msg == "" {
					t.Fatal("legacy 400 has no message")
				}
			}
			failure(t, resp, body, tc.status, msg)
			if got := resp.Header.Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tc.retryAfter)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		e := newEdge(t)
		e.up.Close()
		resp, body := e.get("/v1/tx/" + e.sim.TradeTxs()[0])
		failure(t, resp, body, 502, "Upstream unreachable")
	})
	t.Run("wrong edge credential", func(t *testing.T) {
		e := newEdge(t, withConfig(func(c *config.Config) { c.Upstream.KeyEnv = "WRONG_KEY_VAR" }))
		resp, body := e.get("/v1/tx/" + e.sim.TradeTxs()[0])
		failure(t, resp, body, 502, "Upstream rejected the gateway's credential")
		if bytes.Contains(body, []byte("not-the-legacy-key")) {
			t.Error("the edge's credential leaked into a response")
		}
	})
}

// Two Authorization fields are ambiguous (which one would a proxy in front
// pass on?): a 400, whatever they hold. Every JSON answer says nosniff.
func TestAmbiguousCredentials(t *testing.T) {
	e := newEdge(t)
	path := "/v1/tx/" + e.sim.TradeTxs()[0]
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + keyAll +
		"\r\nAuthorization: Bearer " + keyAll + "\r\nConnection: close\r\n\r\n"))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	failure(t, resp, body, 400, "Only one Authorization header is allowed")
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("no nosniff on an error")
	}
	ok, _ := e.get(path)
	if ok.StatusCode != 200 || ok.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("one Authorization: %d, nosniff %q", ok.StatusCode, ok.Header.Get("X-Content-Type-Options"))
	}
}

// upstream.compression: none asks the legacy host for pages as they are,
// and the answer is the same page as with gzip; a host that compresses
// even when not asked is still read.
func TestUpstreamCompressionNone(t *testing.T) {
	// Each edge has a legacy host of its own: one End for all, or two made
	// either side of a second would date their data a second apart.
	sim := withSim(legacysim.Config{Seed: 7, End: time.Now().Truncate(time.Second)})
	plain := newEdge(t, sim)
	w := "/v1/trader/" + plain.sim.Wallets()[0] + "/activity?limit=7"
	_, want := plain.get(w)
	none := func(c *config.Config) { c.Upstream.Compression = "none" }

	e := newEdge(t, sim, withConfig(none))
	resp, body := e.get(w)
	if resp.StatusCode != 200 || !bytes.Equal(body, want) {
		t.Fatalf("compression none: %d %.200s\nwant %.200s", resp.StatusCode, body, want)
	}
	recent := e.sim.Recent()
	if got := recent[len(recent)-1].Header.Get("Accept-Encoding"); got != "" {
		t.Errorf("upstream Accept-Encoding = %q, want none", got)
	}

	gzipsAnyway := withUpstream(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Header.Set("Accept-Encoding", "gzip")
			next.ServeHTTP(w, r)
		})
	})
	resp, body = newEdge(t, sim, withConfig(none), gzipsAnyway).get(w)
	if resp.StatusCode != 200 || !bytes.Equal(body, want) {
		t.Fatalf("gzip not asked for: %d %.200s", resp.StatusCode, body)
	}
}
