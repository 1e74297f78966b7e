package proxy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"tradergate/internal/testkit"
	"tradergate/legacysim"
	"tradergate/normalize"
	"tradergate/proxy"
	"tradergate/proxy/config"
	"tradergate/proxy/native"
	"tradergate/proxy/route"
)

// The native backend wired into the edge (docs/OPERATING.md "Moving the
// backend"): a native service on loopback that answers variant A from a
// legacysim of its own (the same data as the edge's legacy host), with
// faults a test sets per route, in front of the edge on its own front.

// nativeKey is the edge's credential for the native service.
const nativeKey = "native-credential-of-the-edge"

// nativeBase is the time of the simulations' newest data and the edges'
// clock at start: pages an hour older are settled.
var nativeBase = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// nativeSim is the legacy host's data, the same for every legacysim of a
// test.
func nativeSim() legacysim.Config {
	return legacysim.Config{Seed: 7, Now: func() time.Time { return nativeBase }, End: nativeBase}
}

// nativeHost is the native service: each /v1 request is answered with the
// variant A page the edge would derive from the legacy host, unless fault
// answers it first.
type nativeHost struct {
	t     testing.TB
	sim   *legacysim.Sim
	table *route.Table
	srv   *httptest.Server

	mu sync.Mutex
	// fault, when set, may answer a request itself (and then reports
	// true); page is what the service would answer.
	fault func(w http.ResponseWriter, r *http.Request, rt *route.Route, page []byte) bool
	// calls are the targets asked for, by route.
	calls map[string][]string
}

func newNativeHost(t testing.TB) *nativeHost {
	n := &nativeHost{t: t, sim: legacysim.New(legacysim.Config{Seed: 7, Now: nativeSim().Now, End: nativeBase, Key: legacyKey}),
		table: route.NewTable(), calls: map[string][]string{}}
	n.srv = httptest.NewServer(n)
	t.Cleanup(n.srv.Close)
	return n
}

func (n *nativeHost) setFault(f func(w http.ResponseWriter, r *http.Request, rt *route.Route, page []byte) bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fault = f
}

// called is the targets of route asked for so far.
func (n *nativeHost) called(routeName string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.calls[routeName])
}

func (n *nativeHost) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+nativeKey {
		http.Error(w, `{"message":"bad credential","status_code":"0","data":null}`, http.StatusUnauthorized)
		return
	}
	rt, param := n.table.Match(r.URL.EscapedPath())
	if rt == nil {
		http.NotFound(w, r)
		return
	}
	req, err := rt.Validate(param, r.URL.RawQuery)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	target := "/open-api" + req.UpstreamPath()
	if req.RawQuery != "" {
		target += "?" + req.RawQuery
	}
	lr := httptest.NewRequest(http.MethodGet, target, nil)
	lr.Header.Set("Authorization", "Bearer "+legacyKey)
	rec := httptest.NewRecorder()
	n.sim.ServeHTTP(rec, lr)
	page, _, err := normalize.Rewrite(nil, rec.Body.Bytes(), normalize.Options{Shape: rt.Shape, ShiftCents: true, TimeField: rt.TimeField})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	n.mu.Lock()
	n.calls[rt.Name] = append(n.calls[rt.Name], r.URL.RequestURI())
	fault := n.fault
	n.mu.Unlock()
	if fault != nil && fault(w, r, rt, page) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(page)
}

// withNative turns the native section on against n, with routes, and
// then edit; the edge gets the credential's variable and an admin
// listener. The edge gets its own copy of routes: defaults are filled into
// it, and the edges of one fleet are often given the same map.
func withNative(n *nativeHost, routes map[string]native.RouteConfig, edit func(*native.Config)) edgeOption {
	return func(s *edgeSetup) {
		s.env["TRADERGATE_NATIVE_KEY"] = nativeKey
		withConfig(func(c *config.Config) {
			c.Admin.Listen = "127.0.0.1:0"
			c.Native = native.Config{BaseURL: n.srv.URL, KeyEnv: "TRADERGATE_NATIVE_KEY", Routes: copyRoutes(routes)}
			if edit != nil {
				edit(&c.Native)
			}
			c.Native.ApplyDefaults()
		})(s)
	}
}

// copyRoutes is a deep copy of routes (nil stays nil): each entry's Sample
// points to a float of the copy's own.
func copyRoutes(routes map[string]native.RouteConfig) map[string]native.RouteConfig {
	if routes == nil {
		return nil
	}
	c := make(map[string]native.RouteConfig, len(routes))
	for name, rc := range routes {
		if rc.Sample != nil {
			v := *rc.Sample
			rc.Sample = &v
		}
		c[name] = rc
	}
	return c
}

// Edges built with one routes map fill defaults into copies of their own:
// the caller's map stays as it was, and building two at once does not race.
func TestNativeOptionCopiesTheRoutes(t *testing.T) {
	n := newNativeHost(t)
	sample := 0.5
	routes := map[string]native.RouteConfig{"tx": {Sample: &sample}}
	opt := withNative(n, routes, nil)
	var cfgs [2]config.Config
	var wg sync.WaitGroup
	for i := range cfgs {
		wg.Go(func() {
			s := edgeSetup{env: map[string]string{}}
			opt(&s)
			for _, f := range s.cfg {
				f(&cfgs[i])
			}
		})
	}
	wg.Wait()
	if rc := routes["tx"]; rc.Mode != "" || rc.Sample != &sample || sample != 0.5 {
		t.Errorf("the caller's route changed: mode %q", rc.Mode)
	}
	a, b := cfgs[0].Native.Routes, cfgs[1].Native.Routes
	for _, m := range []map[string]native.RouteConfig{a, b} {
		if rc := m["tx"]; rc.Mode != native.ModeLegacy || rc.Sample == &sample || rc.Sample == nil || *rc.Sample != 0.5 {
			t.Errorf("an edge's route: %+v, want legacy with its own sample of 0.5", rc)
		}
	}
	a["tx"] = native.RouteConfig{Mode: native.ModeNative}
	if b["tx"].Mode != native.ModeLegacy {
		t.Error("two edges share one routes map")
	}
}

// shadowReport is GET /shadow of e's admin listener.
func shadowReport(t *testing.T, e *edge) native.Report {
	t.Helper()
	testkit.Eventually(t, "the admin listener", func() bool { return e.srv.AdminAddr() != "" })
	code, body := getText(t, "http://"+e.srv.AdminAddr()+"/shadow")
	var rep native.Report
	if err := json.Unmarshal([]byte(body), &rep); code != 200 || err != nil {
		t.Fatalf("GET /shadow: %d %v\n%s", code, err, body)
	}
	if strings.Contains(body, nativeKey) || strings.Contains(body, legacyKey) {
		t.Fatal("GET /shadow shows a credential")
	}
	return rep
}

func routeReport(t *testing.T, rep native.Report, name string) native.RouteReport {
	t.Helper()
	for _, r := range rep.Routes {
		if r.Route == name {
			return r
		}
	}
	t.Fatalf("no route %s on /shadow", name)
	return native.RouteReport{}
}

// immutablePages are a settled activity range, a found transaction and a
// found wallet mapping, with a fresh page (the head of the activity list).
type immutablePages struct{ activity, tx, wallet, fresh string }

func pagesOf(sim *legacysim.Sim) immutablePages {
	w := sim.Wallets()[0]
	return immutablePages{
		activity: "/v1/trader/" + w + "/activity?toTimestamp=" + strconv.FormatInt(nativeBase.Add(-time.Hour).Unix(), 10),
		tx:       "/v1/tx/" + sim.TradeTxs()[0],
		wallet:   "/v1/trader/wallet-address/" + w,
		fresh:    "/v1/trader/" + w + "/activity",
	}
}

// changeFirstItem rewrites page with change applied to the string field
// of its first item.
func changeFirstItem(page []byte, field string, change func(string) string) ([]byte, error) {
	var v map[string]any
	dec := json.NewDecoder(bytes.NewReader(page))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	items, _ := v["data"].(map[string]any)["items"].([]any)
	if len(items) == 0 {
		return nil, fmt.Errorf("no item to change in %.200s", page)
	}
	item := items[0].(map[string]any)
	old, _ := item[field].(string)
	item[field] = change(old)
	return json.Marshal(v)
}

// sizeChanged is a native service that answers activity pages with the
// first item's size one digit longer: a difference at data.items[].size,
// still a decimal, so no contract break.
func sizeChanged(t *testing.T) *nativeHost {
	t.Helper()
	n := newNativeHost(t)
	n.setFault(func(w http.ResponseWriter, r *http.Request, rt *route.Route, page []byte) bool {
		if rt.Name != route.Activity {
			return false
		}
		changed, err := changeFirstItem(page, "size", func(v string) string { return v + "1" })
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return true
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(changed)
		return true
	})
	return n
}

// In shadow mode clients get the legacy-derived answers, byte for byte;
// comparisons run on immutable pages only and report exactly the paths
// native changed.
func TestNativeShadowReportsTheDifferences(t *testing.T) {
	ref := newEdge(t, withSim(nativeSim()), withClock(testkit.NewClock(nativeBase).Now))
	n := sizeChanged(t)
	shadow := native.RouteConfig{Mode: native.ModeShadow}
	e := newEdge(t, withSim(nativeSim()), withClock(testkit.NewClock(nativeBase).Now),
		withNative(n, map[string]native.RouteConfig{route.Activity: shadow, "tx": shadow, "wallet_address": shadow}, nil))
	p := pagesOf(e.sim)

	for _, path := range []string{p.activity, p.tx, p.wallet, p.fresh} {
		resp, body := e.get(path)
		_, want := ref.get(path)
		if resp.StatusCode != 200 || !bytes.Equal(body, want) {
			t.Errorf("%s: %d, the answer is not the legacy-derived one:\n%.300s\nwant\n%.300s", path, resp.StatusCode, body, want)
		}
		if resp.Header.Get("X-Cache") != "MISS" {
			t.Errorf("%s: X-Cache %q, want MISS", path, resp.Header.Get("X-Cache"))
		}
	}
	var rep native.Report
	testkit.Eventually(t, "three comparisons", func() bool {
		rep = shadowReport(t, e)
		n := int64(0)
		for _, r := range rep.Routes {
			n += r.Compared + r.NativeErrors
		}
		return n == 3
	})
	act, tx, wallet := routeReport(t, rep, route.Activity), routeReport(t, rep, "tx"), routeReport(t, rep, "wallet_address")
	if act.Compared != 1 || act.Different != 1 || act.Skipped != 1 ||
		len(act.TopPaths) != 1 || act.TopPaths[0] != (native.PathCount{Path: "data.items[].size", Count: 1}) {
		t.Errorf("activity: compared %d different %d skipped %d paths %v; want the one changed path, and the fresh page skipped",
			act.Compared, act.Different, act.Skipped, act.TopPaths)
	}
	for _, r := range []native.RouteReport{tx, wallet} {
		if r.Compared != 1 || r.Equal != 1 || r.Different != 0 || len(r.TopPaths) != 0 || len(r.Recent) != 0 {
			t.Errorf("%s: %+v, want one equal comparison and nothing reported", r.Route, r)
		}
	}
	if got := n.called(route.Activity); len(got) != 1 {
		t.Errorf("native was asked for activity %v: the fresh page is not fetched", got)
	}
	// Shadow work never reaches the legacy host, nor a client's quota.
	if st := e.sim.Stats(); st.Requests != 4 {
		t.Errorf("the legacy host got %d requests, want the 4 misses", st.Requests)
	}
	// A hit does not compare again.
	e.get(p.tx)
	if r := routeReport(t, shadowReport(t, e), "tx"); r.Compared != 1 {
		t.Errorf("tx compared %d times after a hit, want 1", r.Compared)
	}
}

// The answer of a shadowed miss does not wait for native: it arrives
// while the native service still holds the comparison's request.
func TestNativeShadowDoesNotDelayTheAnswer(t *testing.T) {
	n := newNativeHost(t)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	n.setFault(func(w http.ResponseWriter, r *http.Request, rt *route.Route, page []byte) bool {
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return false
	})
	e := newEdge(t, withSim(nativeSim()), withClock(testkit.NewClock(nativeBase).Now),
		withNative(n, map[string]native.RouteConfig{"tx": {Mode: native.ModeShadow}}, func(c *native.Config) { c.Timeout = time.Minute }))
	p := pagesOf(e.sim)
	resp, _ := e.get(p.tx)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	select {
	case <-entered: // the comparison's call is held: the answer came first
	case <-time.After(testkit.WaitBound):
		t.Fatal("no comparison reached native")
	}
	// Another client's miss is not held either.
	if resp, _ := e.get(p.wallet); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	close(release)
	testkit.Eventually(t, "the comparison", func() bool { return routeReport(t, shadowReport(t, e), "tx").Equal == 1 })
}

// Canary: the misses of about percent of the keys go to native, each key
// always to the same side; the edge's answers are the same either way.
func TestNativeCanarySplitsKeysStickily(t *testing.T) {
	const keys, perKey = 200, 3
	n := newNativeHost(t)
	e := newEdge(t, withSim(nativeSim()), withClock(testkit.NewClock(nativeBase).Now),
		withNative(n, map[string]native.RouteConfig{"wallet_address": {Mode: native.ModeCanary, Percent: 30}}, nil),
		withConfig(func(c *config.Config) {
			for i := range keys {
				c.Keys = append(c.Keys, config.KeyConfig{ID: fmt.Sprintf("k%d", i), SHA256: proxy.HashKey(fmt.Sprintf("canary-key-%04d", i)), Plan: "pro", Routes: []string{"*"}})
			}
		}))
	// Every request a miss of its own: an address nobody has.
	address := func(k, j int) string { return fmt.Sprintf("0x%040x", k*perKey+j+1) }
	for k := range keys {
		for j := range perKey {
			resp, body := e.do(http.MethodGet, "/v1/trader/wallet-address/"+address(k, j), "Authorization", fmt.Sprintf("Bearer canary-key-%04d", k))
			if resp.StatusCode != 200 || string(body) != `{"message":"OK","status_code":"1","data":{"walletAddress":null}}` {
				t.Fatalf("key %d: %d %s", k, resp.StatusCode, body)
			}
		}
	}
	asked := map[string]bool{}
	for _, target := range n.called("wallet_address") {
		asked[strings.TrimPrefix(target, "/v1/trader/wallet-address/")] = true
	}
	onNative := 0
	for k := range keys {
		sides := 0
		for j := range perKey {
			if asked[address(k, j)] {
				sides++
			}
		}
		switch sides {
		case perKey:
			onNative++
		case 0:
		default:
			t.Errorf("key %d: %d of its %d misses went to native: a key sees one side", k, sides, perKey)
		}
	}
	if share := float64(onNative) / keys; share < 0.25 || share > 0.35 {
		t.Errorf("%.3f of the keys went to native, want 0.30 ± 0.05", share)
	}
	if got := e.sim.Stats().Requests; got != int64((keys-onNative)*perKey) {
		t.Errorf("the legacy host got %d requests, want the %d misses of the keys on legacy", got, (keys-onNative)*perKey)
	}
}

// Native mode: native serves the misses; when it fails (5xx, timeout, an
// answer that breaks the contract) the legacy host does, and no client
// sees an error. Native pages are cached by the same policy.
func TestNativeModeFallsBackToLegacy(t *testing.T) {
	ref := newEdge(t, withSim(nativeSim()), withClock(testkit.NewClock(nativeBase).Now))
	n := newNativeHost(t)
	txs := n.sim.TradeTxs()
	broken := map[string]string{txs[1]: "5xx", txs[2]: "timeout", txs[3]: "contract"}
	n.setFault(func(w http.ResponseWriter, r *http.Request, rt *route.Route, page []byte) bool {
		switch broken[strings.TrimPrefix(r.URL.Path, "/v1/tx/")] {
		case "5xx":
			http.Error(w, `{"message":"boom","status_code":"0","data":null}`, http.StatusInternalServerError)
		case "timeout":
			<-r.Context().Done()
		case "contract":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"message":"OK","status_code":"1","data":{"txHash":12}}`))
		default:
			return false
		}
		return true
	})
	e := newEdge(t, withSim(nativeSim()), withClock(testkit.NewClock(nativeBase).Now), withLegacy(),
		withNative(n, map[string]native.RouteConfig{"tx": {Mode: native.ModeNative}}, func(c *native.Config) {
			c.Timeout = 300 * time.Millisecond
			c.Rollback.ErrorRatio = 1 // never rolls back: every failure falls back
		}))
	for i, tx := range txs[:6] {
		path := "/v1/tx/" + tx
		resp, body := e.get(path)
		wantResp, want := ref.get(path)
		if resp.StatusCode != 200 || !bytes.Equal(body, want) {
			t.Errorf("tx %d (%s): %d %.200s\nwant %.200s", i, broken[tx], resp.StatusCode, body, want)
		}
		if got, want := resp.Header.Get("Cache-Control"), wantResp.Header.Get("Cache-Control"); got != want {
			t.Errorf("tx %d (%s): Cache-Control %q, want %q as for the legacy-derived page", i, broken[tx], got, want)
		}
	}
	if got := n.called("tx"); len(got) != 6 {
		t.Errorf("native was asked %d times, want 6", len(got))
	}
	if got := e.sim.Stats().Requests; got != 3 {
		t.Errorf("the legacy host got %d requests, want the 3 native failed", got)
	}
	r := routeReport(t, shadowReport(t, e), "tx")
	if r.Requests["ok"] != 3 || r.Requests["5xx"] != 1 || r.Requests["timeout"] != 1 || r.Requests["contract_break"] != 1 || r.Rollback.RolledBack {
		t.Errorf("native calls %v, rolled back %v", r.Requests, r.Rollback.RolledBack)
	}
	// A legacy path's request never goes to native.
	if resp, body := e.get("/open-api/v1/tx/" + txs[7]); resp.StatusCode != 200 {
		t.Fatalf("legacy path: %d %s", resp.StatusCode, body)
	}
	if got := n.called("tx"); len(got) != 6 {
		t.Errorf("a legacy path's miss went to native")
	}
}

// A route whose native errors pass rollback.error_ratio within
// rollback.window goes back to legacy, says so on /shadow, the status
// page, the metrics and the log, keeps shadowing, and a reload re-arms it.
func TestNativeRollbackAndReload(t *testing.T) {
	clock := testkit.NewClock(nativeBase)
	logs := &testkit.LogBuffer{}
	n := newNativeHost(t)
	n.setFault(func(w http.ResponseWriter, r *http.Request, rt *route.Route, page []byte) bool {
		http.Error(w, "down", http.StatusBadGateway)
		return true
	})
	e := newEdge(t, withSim(nativeSim()), withClock(clock.Now), func(s *edgeSetup) { s.logger = logs.Logger() },
		withNative(n, map[string]native.RouteConfig{"tx": {Mode: native.ModeNative}}, func(c *native.Config) {
			c.Rollback = native.RollbackConfig{ErrorRatio: 0.5, Window: time.Minute, MinRequests: 5}
		}))
	txs := e.sim.TradeTxs()
	next := 0
	miss := func(k int) {
		t.Helper()
		for range k {
			resp, body := e.get("/v1/tx/" + txs[next])
			next++
			if resp.StatusCode != 200 {
				t.Fatalf("a client saw %d %s", resp.StatusCode, body)
			}
		}
	}
	miss(4)
	clock.Advance(2 * time.Minute) // those four leave the window
	miss(4)
	if r := routeReport(t, shadowReport(t, e), "tx"); r.Rollback.RolledBack {
		t.Fatalf("rolled back on failures outside the window: %+v", r.Rollback)
	}
	miss(1)
	r := routeReport(t, shadowReport(t, e), "tx")
	if !r.Rollback.RolledBack || r.EffectiveMode != native.ModeShadow ||
		!strings.Contains(r.Rollback.Reason, "native error ratio 1.000 (5 of 5 calls in 1m0s) passed rollback.error_ratio 0.5") {
		t.Fatalf("after five failures in the window: %+v, effective %s", r.Rollback, r.EffectiveMode)
	}
	if !strings.Contains(logs.String(), `"msg":"native route rolled back to legacy","route":"tx"`) {
		t.Errorf("no warning line")
	}
	if got := metricValue(scrape(t, e), `tradergate_native_rolled_back{route="tx"}`); got != "1" {
		t.Errorf("tradergate_native_rolled_back{tx} = %q, want 1", got)
	}
	_, page := getText(t, "http://"+e.srv.AdminAddr()+"/status.json")
	var snap struct {
		Health struct{ Reasons []string }
		Native struct {
			Routes []struct {
				RolledBack bool   `json:"rolled_back"`
				Reason     string `json:"reason"`
			}
		}
	}
	if err := json.Unmarshal([]byte(page), &snap); err != nil || len(snap.Native.Routes) != 1 || !snap.Native.Routes[0].RolledBack ||
		!strings.Contains(snap.Native.Routes[0].Reason, "passed rollback.error_ratio") ||
		!slices.Contains(snap.Health.Reasons, "native rolled back to legacy: tx") {
		t.Errorf("status.json: %v\n%.600s", err, page)
	}
	if _, html := getText(t, "http://"+e.srv.AdminAddr()+"/status"); !strings.Contains(html, "passed rollback.error_ratio 0.5") {
		t.Error("the status page does not say why tx rolled back")
	}

	// Rolled back: clients on legacy, comparisons going on.
	before := len(n.called("tx"))
	miss(1)
	testkit.Eventually(t, "the comparison of a rolled back route", func() bool { return len(n.called("tx")) == before+1 })
	if got := e.sim.Stats().Requests; got != int64(next) {
		t.Errorf("the legacy host got %d requests, want %d: every miss", got, next)
	}

	if err := e.srv.Reload(e.cfg); err != nil {
		t.Fatal(err)
	}
	r = routeReport(t, shadowReport(t, e), "tx")
	if r.Rollback.RolledBack || r.EffectiveMode != native.ModeNative {
		t.Errorf("after a reload: %+v, effective %s", r.Rollback, r.EffectiveMode)
	}
	if got := metricValue(scrape(t, e), `tradergate_native_rolled_back{route="tx"}`); got != "0" {
		t.Errorf("tradergate_native_rolled_back{tx} = %q after a reload, want 0", got)
	}
}

// The native section is validated like every other, and reloads without
// a restart but for native.shadow.
func TestNativeConfig(t *testing.T) {
	parse := func(t *testing.T, extra string) (*config.Config, error) {
		t.Helper()
		cfg, err := config.Parse([]byte(testConfig("http://legacy.invalid/open-api") + extra))
		if err != nil {
			return nil, err
		}
		return cfg, cfg.Validate(func(k string) string {
			return map[string]string{"TRADERGATE_UPSTREAM_KEY": legacyKey, "NK": nativeKey}[k]
		})
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"unknown route": {"native:\n  base_url: http://n.invalid\n  key_env: NK\n  routes:\n    trades: {mode: shadow}\n",
			"native.routes.trades: unknown route"},
		"no base_url": {"native:\n  routes:\n    tx: {mode: native}\n", "native.base_url: is required when a route is not legacy"},
		"unset credential": {"native:\n  base_url: http://n.invalid\n  key_env: NOPE\n  routes:\n    tx: {mode: shadow}\n",
			"native.key_env: environment variable NOPE"},
		"too slow for write_timeout": {"native:\n  base_url: http://n.invalid\n  key_env: NK\n  timeout: 26s\n  routes:\n    tx: {mode: canary, percent: 5}\n",
			"server.write_timeout: must exceed native.timeout + upstream.timeout (41s)"},
		"unknown field": {"native:\n  base_url: http://n.invalid\n  modes: {}\n", "native.modes"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := parse(t, tc.yaml)
			if cfg != nil && err == nil {
				t.Fatalf("accepted; want %q", tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want %q", err, tc.want)
			}
		})
	}
	if _, err := parse(t, "native:\n  base_url: http://n.invalid/\n  key_env: NK\n  routes:\n    tx: {mode: shadow, sample: 0.5}\n"); err != nil {
		t.Errorf("a valid section: %v", err)
	}

	logs := &testkit.LogBuffer{}
	n := newNativeHost(t)
	e := newEdge(t, func(s *edgeSetup) { s.logger = logs.Logger() }, withNative(n, nil, nil))
	next := *e.cfg
	next.Native.Routes = map[string]native.RouteConfig{"tx": {Mode: native.ModeShadow}}
	if err := e.srv.Reload(&next); err != nil {
		t.Fatal(err)
	}
	if r := routeReport(t, shadowReport(t, e), "tx"); r.Mode != native.ModeShadow {
		t.Errorf("after reload tx is %s, want shadow", r.Mode)
	}
	if strings.Contains(logs.String(), "take effect only on restart") {
		t.Errorf("a native mode change asked for a restart:\n%s", logs)
	}
	next.Native.Shadow.Workers++
	if err := e.srv.Reload(&next); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `"sections":"native.shadow"`) {
		t.Errorf("native.shadow changed without a restart warning naming it:\n%s", logs)
	}
}
