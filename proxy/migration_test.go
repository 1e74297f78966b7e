package proxy_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"tradergate/cache/configerr"
	"tradergate/docs"
	"tradergate/docs/openapitest"
	"tradergate/internal/testkit"
	"tradergate/internal/testkit/redistest"
	"tradergate/legacysim"
	"tradergate/proxy/config"
)

// The legacy section of the migration tests.
const (
	deprecatedAt = "2026-01-01T00:00:00Z"
	sunsetAt     = "2027-06-01T00:00:00Z"
	guideURL     = "https://example.com/migrate-to-v1"
)

// withLegacy serves the legacy paths, deprecated, with a sunset and a guide.
func withLegacy(edit ...func(*config.LegacyConfig)) edgeOption {
	return withConfig(func(c *config.Config) {
		c.Legacy = config.LegacyConfig{Enabled: true, Deprecation: deprecatedAt, Sunset: sunsetAt, GuideURL: guideURL}
		for _, f := range edit {
			f(&c.Legacy)
		}
	})
}

// legacyDirect is the legacy host's own answer to path (and query), asked
// with the edge's credential: what a client of the legacy host gets today.
func (e *edge) legacyDirect(pathQuery string) []byte {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.up.URL+pathQuery, nil)
	req.Header.Set("Authorization", "Bearer "+legacyKey)
	resp, err := e.up.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		e.t.Fatalf("legacy host: %s: %d %s", pathQuery, resp.StatusCode, b)
	}
	return b
}

// legacyNextCursor is data.nextCursor of a variant B list body.
func legacyNextCursor(t *testing.T, body []byte) string {
	t.Helper()
	var b struct {
		Data struct{ NextCursor *string } `json:"data"`
	}
	if err := json.Unmarshal(body, &b); err != nil || b.Data.NextCursor == nil {
		t.Fatalf("no nextCursor in %.200s (%v)", body, err)
	}
	return *b.Data.NextCursor
}

func unixOf(t *testing.T, s string) int64 {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm.Unix()
}

// Each of the eight legacy paths answers the legacy host's own bytes, with
// the deprecation headers and the link to the /v1 request that serves the
// same data, which the test then calls.
func TestLegacyPathsServeTheLegacyHostsBytes(t *testing.T) {
	e := newEdge(t, withLegacy())
	v := openapitest.New(t)
	w := e.sim.Wallets()[0]
	tok := e.sim.Markets()[0].Tokens[0]
	var signer string
	for s, wl := range e.sim.Signers() {
		if wl == w {
			signer = s
		}
	}
	obFirst := "/open-api/v1/orderbook/events?tokenId=" + tok + "&limit=5"
	obCursor := url.QueryEscape(legacyNextCursor(t, e.legacyDirect(obFirst)))
	actFirst := "/open-api/v1/trader/" + w + "/activity?limit=3"
	actCursor := url.QueryEscape(legacyNextCursor(t, e.legacyDirect(actFirst)))
	tx := e.sim.TradeTxs()[0]
	tests := []struct{ path, successor string }{
		{obFirst, "/v1/orderbook/events?tokenId=" + tok + "&order=asc&limit=5"},
		{obFirst + "&cursor=" + obCursor + "&junk=1", "/v1/orderbook/events?tokenId=" + tok + "&order=asc&limit=5&cursor=" + obCursor},
		// No limit: the legacy host's own activity default, 50, named in
		// the successor.
		{"/open-api/v1/trader/" + w + "/activity", "/v1/trader/" + w + "/activity?limit=50"},
		{actFirst + "&cursor=" + actCursor, "/v1/trader/" + w + "/activity?cursor=" + actCursor + "&limit=3"},
		{"/open-api/v1/trader/" + w + "/deposits-withdrawals?type=deposit", "/v1/trader/" + w + "/deposits-withdrawals?type=deposit&limit=20"},
		{"/open-api/v1/trader/" + w + "/combo-positions/closed", "/v1/trader/" + w + "/combo-positions/closed?limit=20"},
		{"/open-api/v1/trader/" + w + "/positions/closed", "/v1/trader/" + w + "/positions/closed?limit=20"},
		{"/open-api/v1/trader/" + w + "/positions/open?limit=2", "/v1/trader/" + w + "/positions/open?limit=2"},
		{"/open-api/v1/tx/" + tx, "/v1/tx/" + tx},
		{"/open-api/v1/tx/" + e.sim.ComboTxs()[0], "/v1/tx/" + e.sim.ComboTxs()[0]},
		{"/open-api/v1/trader/wallet-address/" + signer, "/v1/trader/wallet-address/" + signer},
	}
	wantDeprecation := "@" + strconv.FormatInt(unixOf(t, deprecatedAt), 10)
	for _, tc := range tests {
		resp, body := e.get(tc.path)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", tc.path, resp.StatusCode, body)
			continue
		}
		// The document describes the legacy paths too, as deprecated.
		lreq, _ := http.NewRequest(http.MethodGet, e.front.URL+tc.path, nil)
		v.Response(t, lreq, resp, body)
		if want := e.legacyDirect(tc.path); string(body) != string(want) {
			t.Errorf("%s: the edge answered\n%.300s\nthe legacy host\n%.300s", tc.path, body, want)
		}
		if got := resp.Header.Get("Deprecation"); got != wantDeprecation {
			t.Errorf("%s: Deprecation %q, want %q", tc.path, got, wantDeprecation)
		}
		if got := resp.Header.Get("Sunset"); got != "Tue, 01 Jun 2027 00:00:00 GMT" {
			t.Errorf("%s: Sunset %q", tc.path, got)
		}
		wantLink := "<" + tc.successor + `>; rel="successor-version", <` + guideURL + `>; rel="deprecation", <` + guideURL + `>; rel="sunset"`
		if got := resp.Header.Get("Link"); got != wantLink {
			t.Errorf("%s: Link\n%s\nwant\n%s", tc.path, got, wantLink)
		}
		// The successor serves the same data, in variant A, as documented.
		req, _ := http.NewRequest(http.MethodGet, e.front.URL+tc.successor, nil)
		sresp, sbody := e.get(tc.successor)
		if sresp.StatusCode != 200 {
			t.Errorf("successor %s: %d %s", tc.successor, sresp.StatusCode, sbody)
		}
		v.Response(t, req, sresp, sbody)
		if sresp.Header.Get("Deprecation") != "" || sresp.Header.Get("Link") != "" {
			t.Errorf("successor %s carries deprecation headers", tc.successor)
		}
	}
}

// A legacy page and its /v1 twin are two cache entries; a legacy hit does
// not call the legacy host; a stampede of legacy misses calls it once.
func TestLegacyCache(t *testing.T) {
	e := newEdge(t, withLegacy())
	tx := e.sim.TradeTxs()[0]
	e.sim.ResetStats()
	resp, legacyBody := e.get("/open-api/v1/tx/" + tx)
	if resp.StatusCode != 200 || resp.Header.Get("X-Cache") != "MISS" {
		t.Fatalf("legacy: %d %s", resp.StatusCode, resp.Header.Get("X-Cache"))
	}
	resp, v1Body := e.get("/v1/tx/" + tx)
	if resp.StatusCode != 200 || resp.Header.Get("X-Cache") != "MISS" {
		t.Fatalf("/v1 after legacy: %d %s, want its own miss", resp.StatusCode, resp.Header.Get("X-Cache"))
	}
	if string(legacyBody) == string(v1Body) || !strings.HasPrefix(string(legacyBody), `{"success":true`) ||
		!strings.HasPrefix(string(v1Body), `{"message":"OK"`) {
		t.Errorf("bodies mixed:\nlegacy %.80s\nv1 %.80s", legacyBody, v1Body)
	}
	if n := e.sim.Stats().Requests; n != 2 {
		t.Errorf("%d legacy host calls, want 2", n)
	}
	// Upper-case digits are the same canonical request, so the same entry.
	resp, hit := e.get("/open-api/v1/tx/0x" + strings.ToUpper(tx[2:]))
	if resp.Header.Get("X-Cache") != "HIT" || string(hit) != string(legacyBody) {
		t.Errorf("legacy again: %s, same body %v", resp.Header.Get("X-Cache"), string(hit) == string(legacyBody))
	}
	if n := e.sim.Stats().Requests; n != 2 {
		t.Errorf("a legacy hit called the legacy host: %d calls", n)
	}

	e.sim.SetFaults(legacysim.Faults{Latency: 300 * time.Millisecond})
	e.sim.ResetStats()
	path := "/open-api/v1/trader/" + e.sim.Wallets()[1] + "/activity?limit=7"
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Go(func() {
			resp, _ := e.get(path)
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	for i, s := range statuses {
		if s != 200 {
			t.Errorf("request %d: %d", i, s)
		}
	}
	if n := e.sim.Stats().Requests; n != 1 {
		t.Errorf("20 concurrent legacy misses made %d legacy host calls, want 1", n)
	}
}

// failureB asserts a variant B failure body.
func failureB(t *testing.T, resp *http.Response, body []byte, status int, msg string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("status = %d, want %d (body %s)", resp.StatusCode, status, body)
	}
	want := `{"success":false,"code":"` + strconv.Itoa(status) + `","message":` + jsonString(msg) + `,"data":null}`
	if string(body) != want {
		t.Errorf("body = %s, want %s", body, want)
	}
	if resp.Header.Get("Deprecation") == "" {
		t.Error("a legacy refusal without Deprecation")
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}
}

// The edge's own refusals on legacy paths are variant B, in the legacy
// host's words where it has its own (429).
func TestLegacyErrorsAreVariantB(t *testing.T) {
	e := newEdge(t, withLegacy(), withLimitedKey(1, time.Minute))
	w := e.sim.Wallets()[0]
	tx := "/open-api/v1/tx/" + e.sim.TradeTxs()[0]

	resp, body := e.do(http.MethodGet, tx)
	failureB(t, resp, body, 401, "Missing or invalid API key")
	if resp.Header.Get("WWW-Authenticate") == "" {
		t.Error("401 without WWW-Authenticate")
	}
	resp, body = e.do(http.MethodGet, "/open-api/v1/trader/"+w+"/activity", "Authorization", "Bearer "+keyTxOnly)
	failureB(t, resp, body, 403, "API key is not allowed to use this resource")
	resp, body = e.get("/open-api/v1/trader/0x12/activity")
	failureB(t, resp, body, 400, "Invalid address format")
	resp, body = e.get("/open-api/v1/orderbook/events?limit=5")
	failureB(t, resp, body, 400, "tokenId, marketId, or conditionId is required")
	resp, body = e.get("/open-api/v1/nothing")
	failureB(t, resp, body, 404, "Not found")
	// The edge's own extension has no legacy path.
	resp, body = e.get("/open-api/v1/orderbook/book?tokenId=1")
	failureB(t, resp, body, 404, "Not found")

	// One request a minute: the second is refused, as the legacy host
	// words it, with the rate limit headers.
	if resp, _ := e.do(http.MethodGet, tx, "Authorization", "Bearer "+keyLimited); resp.StatusCode != 200 {
		t.Fatalf("first limited request: %d", resp.StatusCode)
	}
	resp, body = e.do(http.MethodGet, tx, "Authorization", "Bearer "+keyLimited)
	failureB(t, resp, body, 429, "Too many requests. Please slow down.")
	for _, h := range []string{"Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		if resp.Header.Get(h) == "" {
			t.Errorf("429 without %s", h)
		}
	}
	// The /v1 429 keeps its own words.
	resp, body = e.do(http.MethodGet, "/v1/tx/"+e.sim.TradeTxs()[0], "Authorization", "Bearer "+keyLimited)
	failure(t, resp, body, 429, "Rate limit exceeded")

	e.sim.SetFaults(legacysim.Faults{FailStatus: 500})
	resp, body = e.get("/open-api/v1/trader/" + w + "/positions/open")
	failureB(t, resp, body, 502, "Upstream error")
	e.sim.SetFaults(legacysim.Faults{FailStatus: 404})
	resp, body = e.get("/open-api/v1/trader/" + w + "/positions/closed")
	failureB(t, resp, body, 404, "Not found") // the legacy host's own refusal, passed on
	e.sim.SetFaults(legacysim.Faults{})
}

// reload applies cfg edits to the edge's configuration, as SIGHUP does.
func (e *edge) reload(edits ...func(*config.Config)) {
	e.t.Helper()
	cfg, err := config.Parse([]byte(testConfig(e.up.URL + "/open-api")))
	if err != nil {
		e.t.Fatal(err)
	}
	for _, f := range edits {
		f(cfg)
	}
	if err := cfg.Validate(func(k string) string { return map[string]string{"TRADERGATE_UPSTREAM_KEY": legacyKey}[k] }); err != nil {
		e.t.Fatal(err)
	}
	if err := e.srv.Reload(cfg); err != nil {
		e.t.Fatal(err)
	}
}

// Past the sunset, in a brownout, or for a retired key: 410 naming the
// /v1 request to use; a reload that lifts it serves again.
func TestLegacyRetirement(t *testing.T) {
	t0 := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := testkit.NewClock(t0)
	brownout := func(l *config.LegacyConfig) {
		l.Sunset = "2027-03-01T14:00:00Z"
		l.Brownouts = []config.Brownout{{Start: "2027-03-01T12:10:00Z", Duration: 30 * time.Minute}}
	}
	e := newEdge(t, withClock(clock.Now), withLegacy(brownout))
	w := e.sim.Wallets()[0]
	path := "/open-api/v1/trader/" + "0x" + strings.ToUpper(w[2:]) + "/positions/closed?limit=5"
	successor := "/v1/trader/" + w + "/positions/closed?limit=5"
	wantLink := "<" + successor + `>; rel="successor-version", <` + guideURL + `>; rel="deprecation", <` + guideURL + `>; rel="sunset"`
	expect := func(step string, status int, msg string) {
		t.Helper()
		resp, body := e.get(path)
		if status == 200 {
			if resp.StatusCode != 200 {
				t.Errorf("%s: %d %s", step, resp.StatusCode, body)
			}
		} else {
			failureB(t, resp, body, status, msg)
		}
		if got := resp.Header.Get("Link"); got != wantLink {
			t.Errorf("%s: Link %q", step, got)
		}
	}
	expect("before", 200, "")
	clock.Set(t0.Add(15 * time.Minute))
	expect("brownout", 410, "This API is unavailable during a scheduled brownout until 2027-03-01T12:40:00Z, ahead of its retirement; use "+successor+" instead")
	clock.Set(t0.Add(40 * time.Minute))
	expect("after the brownout", 200, "")
	clock.Set(t0.Add(2 * time.Hour))
	expect("at the sunset", 410, "This API was retired on 2027-03-01T14:00:00Z; use "+successor+" instead")
	// /v1 is not touched by any of it.
	if resp, body := e.get(successor); resp.StatusCode != 200 {
		t.Errorf("/v1 past the legacy sunset: %d %s", resp.StatusCode, body)
	}

	e.reload(withLegacyConfig(func(l *config.LegacyConfig) { l.Sunset = "2027-09-01T00:00:00Z" }))
	wantLink = "<" + successor + `>; rel="successor-version", <` + guideURL + `>; rel="deprecation", <` + guideURL + `>; rel="sunset"`
	expect("sunset moved by a reload", 200, "")

	retire := func(c *config.Config) { c.Keys[0].Legacy = "retired" }
	e.reload(withLegacyConfig(func(l *config.LegacyConfig) { l.Sunset = "" }), retire)
	wantLink = "<" + successor + `>; rel="successor-version", <` + guideURL + `>; rel="deprecation"`
	expect("retired key", 410, "This API is retired for this API key; use "+successor+" instead")
	if resp, _ := e.get(successor); resp.StatusCode != 200 {
		t.Errorf("/v1 of a retired key: %d", resp.StatusCode)
	}
	e.reload(withLegacyConfig(func(l *config.LegacyConfig) { l.Sunset = "" }))
	expect("key allowed again", 200, "")

	// Legacy paths off: unknown paths, in variant A.
	e.reload()
	resp, body := e.get(path)
	failure(t, resp, body, 404, "Not found")
	if resp.Header.Get("Deprecation") != "" {
		t.Error("Deprecation on a path the edge no longer serves")
	}
}

// withLegacyConfig is withLegacy for reload's edits.
func withLegacyConfig(edit func(*config.LegacyConfig)) func(*config.Config) {
	return func(c *config.Config) {
		c.Legacy = config.LegacyConfig{Enabled: true, Deprecation: deprecatedAt, Sunset: sunsetAt, GuideURL: guideURL}
		edit(&c.Legacy)
	}
}

func TestLegacyConfigValidation(t *testing.T) {
	tests := []struct {
		name string
		edit func(*config.Config)
		want string
	}{
		{"sunset before deprecation", withLegacyConfig(func(l *config.LegacyConfig) { l.Sunset = "2025-01-01T00:00:00Z" }),
			"legacy.sunset: must not be before legacy.deprecation (" + deprecatedAt + ")"},
		{"no deprecation", withLegacyConfig(func(l *config.LegacyConfig) { l.Deprecation = "" }),
			"legacy.deprecation: is required when legacy.enabled is true: the Deprecation header states it"},
		{"bad time", withLegacyConfig(func(l *config.LegacyConfig) { l.Sunset = "tomorrow" }),
			`legacy.sunset: must be an RFC 3339 time such as 2026-12-01T00:00:00Z, got "tomorrow"`},
		{"guide not absolute", withLegacyConfig(func(l *config.LegacyConfig) { l.GuideURL = "/guide" }),
			`legacy.guide_url: must be an absolute http or https URL, got "/guide"`},
		{"brownout without duration", withLegacyConfig(func(l *config.LegacyConfig) {
			l.Brownouts = []config.Brownout{{Start: "2027-01-01T00:00:00Z"}}
		}), "legacy.brownouts[0].duration: must be positive, got 0s"},
		{"key legacy value", func(c *config.Config) { c.Keys[1].Legacy = "never" },
			`keys[1].legacy: must be allow or retired, got "never"`},
	}
	for _, tc := range tests {
		cfg, err := config.Parse([]byte(testConfig("http://127.0.0.1:1/open-api")))
		if err != nil {
			t.Fatal(err)
		}
		tc.edit(cfg)
		err = cfg.Validate(func(k string) string { return map[string]string{"TRADERGATE_UPSTREAM_KEY": "k"}[k] })
		var l configerr.List
		if !errors.As(err, &l) || len(l) != 1 || l[0].Detail() != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
	// The file form: times unquoted, as YAML would write them.
	cfg, err := config.Parse([]byte(testConfig("http://127.0.0.1:1/open-api") + `
legacy:
  enabled: true
  deprecation: 2026-12-01T00:00:00Z
  sunset: ""
  guide_url: ""
  brownouts: [{start: 2027-01-05T09:00:00Z, duration: 1h}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(func(k string) string { return map[string]string{"TRADERGATE_UPSTREAM_KEY": "k"}[k] }); err != nil {
		t.Fatal(err)
	}
}

// GET /v1/openapi.json needs no key and answers the document.
func TestOpenAPIServed(t *testing.T) {
	e := newEdge(t)
	v := openapitest.New(t)
	req, _ := http.NewRequest(http.MethodGet, e.front.URL+"/v1/openapi.json", nil)
	resp, body := e.do(http.MethodGet, "/v1/openapi.json")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || string(body) != string(docs.OpenAPI()) {
		t.Fatalf("%d %q, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
	v.Response(t, req, resp, body)
	resp, body = e.do(http.MethodPost, "/v1/openapi.json")
	failure(t, resp, body, 405, "Method not allowed")
}

// report is GET /migration of the edge's admin listener.
type report struct {
	Scope    string  `json:"scope"`
	Sunset   *string `json:"sunset"`
	GuideURL *string `json:"guide_url"`
	Keys     []struct {
		KeyID          string  `json:"key_id"`
		Legacy         string  `json:"legacy"`
		V1Requests     int64   `json:"v1_requests"`
		LegacyRequests int64   `json:"legacy_requests"`
		FirstLegacyUse *string `json:"first_legacy_use"`
		LastLegacyUse  *string `json:"last_legacy_use"`
		LegacyRoutes   []struct {
			Route    string `json:"route"`
			Requests int64  `json:"requests"`
			LastCall string `json:"last_call"`
		} `json:"legacy_routes"`
	} `json:"keys"`
}

func (e *edge) migrationReport() report {
	e.t.Helper()
	testkit.Eventually(e.t, "the admin listener", func() bool { return e.srv.AdminAddr() != "" })
	resp, err := http.Get("http://" + e.srv.AdminAddr() + "/migration")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var r report
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 {
		e.t.Fatalf("/migration: %d %v", resp.StatusCode, err)
	}
	return r
}

// counts is a report's key_id -> "v1/legacy/route:n,route:n".
func (r report) counts() map[string]string {
	out := map[string]string{}
	for _, k := range r.Keys {
		s := strconv.FormatInt(k.V1Requests, 10) + "/" + strconv.FormatInt(k.LegacyRequests, 10) + "/"
		for i, rt := range k.LegacyRoutes {
			if i > 0 {
				s += ","
			}
			s += rt.Route + ":" + strconv.FormatInt(rt.Requests, 10)
		}
		out[k.KeyID] = s
	}
	return out
}

// scriptedMix sends, spread over the edges: key all, 3 legacy activity, 1
// legacy tx, 2 /v1 tx; key txonly, 2 legacy tx (one a 410: still a use),
// 4 /v1 tx. Refused requests (401, 400) are not uses of a key.
func scriptedMix(t *testing.T, edges []*edge) {
	t.Helper()
	e0 := edges[0]
	w := e0.sim.Wallets()[0]
	tx := e0.sim.TradeTxs()[0]
	type call struct{ key, path string }
	calls := []call{
		{keyAll, "/open-api/v1/trader/" + w + "/activity"},
		{keyAll, "/open-api/v1/trader/" + w + "/activity?limit=2"},
		{keyAll, "/open-api/v1/trader/" + w + "/activity"},
		{keyAll, "/open-api/v1/tx/" + tx},
		{keyAll, "/v1/tx/" + tx},
		{keyAll, "/v1/tx/" + tx},
		{keyTxOnly, "/open-api/v1/tx/" + tx},
		{keyTxOnly, "/open-api/v1/tx/" + tx},
		{keyTxOnly, "/v1/tx/" + tx},
		{keyTxOnly, "/v1/tx/" + tx},
		{keyTxOnly, "/v1/tx/" + tx},
		{keyTxOnly, "/v1/tx/" + tx},
		{"", "/open-api/v1/tx/" + tx},
		{keyAll, "/open-api/v1/tx/0x12"},
	}
	for i, c := range calls {
		e := edges[i%len(edges)]
		auth := ""
		if c.key != "" {
			auth = "Bearer " + c.key
		}
		resp, body := e.do(http.MethodGet, c.path, "Authorization", auth)
		if c.key != "" && resp.StatusCode != 200 && resp.StatusCode != 400 {
			t.Fatalf("%s: %d %s", c.path, resp.StatusCode, body)
		}
	}
}

var wantMix = map[string]string{
	"all":    "2/4/activity:3,tx:1",
	"txonly": "4/2/tx:2",
}

func TestMigrationReport(t *testing.T) {
	at := time.Date(2027, 2, 1, 8, 0, 0, 0, time.UTC)
	e := newEdge(t, withLegacy(), withAdmin, withClock(testkit.NewClock(at).Now))
	before := e.migrationReport()
	if got := before.counts(); got["all"] != "0/0/" || got["txonly"] != "0/0/" || len(got) != 2 {
		t.Errorf("before any call: %v; want every configured key at zero", got)
	}
	scriptedMix(t, []*edge{e})
	r := e.migrationReport()
	if got := r.counts(); len(got) != 2 || got["all"] != wantMix["all"] || got["txonly"] != wantMix["txonly"] {
		t.Errorf("counts %v, want %v", got, wantMix)
	}
	if r.Scope != "replica" || r.Sunset == nil || *r.Sunset != sunsetAt || r.GuideURL == nil || *r.GuideURL != guideURL {
		t.Errorf("scope %q sunset %v guide %v", r.Scope, r.Sunset, r.GuideURL)
	}
	for _, k := range r.Keys {
		if k.FirstLegacyUse == nil || *k.FirstLegacyUse != "2027-02-01T08:00:00Z" || *k.LastLegacyUse != "2027-02-01T08:00:00Z" {
			t.Errorf("%s: first %v last %v", k.KeyID, k.FirstLegacyUse, k.LastLegacyUse)
		}
		for _, rt := range k.LegacyRoutes {
			if rt.LastCall != "2027-02-01T08:00:00Z" {
				t.Errorf("%s %s: last call %s", k.KeyID, rt.Route, rt.LastCall)
			}
		}
	}
	// The same counts as Prometheus series.
	mfs, err := e.srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "tradergate_migration_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var id, api string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "key_id":
					id = l.GetValue()
				case "api":
					api = l.GetValue()
				}
			}
			got[id+" "+api] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"all legacy": 4, "all v1": 2, "txonly legacy": 2, "txonly v1": 4}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("tradergate_migration_requests_total{%s} = %v, want %v", k, got[k], v)
		}
	}
}

// With Redis the report is the fleet's: calls spread over two replicas
// are counted once each, whichever replica is asked.
func TestMigrationReportFleet(t *testing.T) {
	r := redistest.Start(t)
	fleet := fleetOf(t, 2, r.Addr(), withLegacy(), withAdmin)
	scriptedMix(t, fleet)
	for i, e := range fleet {
		var last report
		testkit.Eventually(t, "the fleet's counts in the report", func() bool {
			last = e.migrationReport()
			c := last.counts()
			return last.Scope == "fleet" && c["all"] == wantMix["all"] && c["txonly"] == wantMix["txonly"]
		})
		if c := last.counts(); len(c) != 2 {
			t.Errorf("replica %d: %v", i, c)
		}
	}
	// Stable: no count is added twice by later flushes. Every report
	// flushes its replica first, as the once-a-second loop does: ask each
	// replica a few more times rather than wait for the loop.
	for range 3 {
		for _, e := range fleet {
			e.migrationReport()
		}
	}
	if c := fleet[1].migrationReport().counts(); c["all"] != wantMix["all"] || c["txonly"] != wantMix["txonly"] {
		t.Errorf("after more flushes: %v, want %v", c, wantMix)
	}
}
