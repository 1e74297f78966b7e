package native_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tradergate/docs"
	"tradergate/internal/testkit"
	"tradergate/legacysim"
	"tradergate/normalize"
	"tradergate/proxy/native"
	"tradergate/proxy/route"
)

const credential = "native-credential-s3cret"

// harness is a Backend with its registry, log and clock.
type harness struct {
	b     *native.Backend
	reg   *prometheus.Registry
	log   *testkit.LogBuffer
	clock *testkit.Clock
	cfg   native.Config
}

func newHarness(t *testing.T, baseURL string, edit func(*native.Config)) *harness {
	t.Helper()
	cfg := native.Config{BaseURL: baseURL, KeyEnv: "NATIVE_KEY", Timeout: 2 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	cfg.ApplyDefaults()
	if errs := cfg.Validate(env(map[string]string{"NATIVE_KEY": credential})); errs != nil {
		t.Fatalf("config: %v", errs)
	}
	h := &harness{reg: prometheus.NewRegistry(), log: &testkit.LogBuffer{}, clock: testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), cfg: cfg}
	b, err := native.New(cfg, native.Options{
		Routes:   route.NewTable().Routes(),
		OpenAPI:  docs.OpenAPI(),
		Registry: h.reg,
		Logger:   h.log.Logger(),
		Now:      h.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		if strings.Contains(h.log.String(), credential) {
			t.Errorf("the credential is in the log:\n%s", h.log)
		}
	})
	h.b = b
	return h
}

func (h *harness) route(t *testing.T, name string) native.RouteReport {
	t.Helper()
	for _, r := range h.b.Report().Routes {
		if r.Route == name {
			return r
		}
	}
	t.Fatalf("no route %s in the report", name)
	return native.RouteReport{}
}

// page is one legacy-derived answer: the /v1 target and the variant A body.
type page struct {
	route  string
	target string
	body   []byte
}

// legacyPages asks a simulated legacy host for one page of each route the
// test needs, with items where the route has them, and rewrites each into
// variant A as the edge does.
func legacyPages(t *testing.T) map[string]page {
	t.Helper()
	end := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	sim := legacysim.New(legacysim.Config{Seed: 7, Key: "legacy-key", End: end, Now: func() time.Time { return end }})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	table := route.NewTable()
	get := func(name, param, query string) (page, int) {
		rt := table.ByName(name)
		req, err := rt.Validate(param, query)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		target := srv.URL + "/open-api" + req.UpstreamPath()
		if req.RawQuery != "" {
			target += "?" + req.RawQuery
		}
		hr, _ := http.NewRequest(http.MethodGet, target, nil)
		hr.Header.Set("Authorization", "Bearer legacy-key")
		resp, err := srv.Client().Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out, meta, err := normalize.Rewrite(nil, b, normalize.Options{Shape: rt.Shape, ShiftCents: true, TimeField: rt.TimeField})
		if err != nil {
			t.Fatalf("%s: rewrite: %v", name, err)
		}
		return page{route: name, target: req.SuccessorPath(), body: out}, meta.Items
	}
	pages := map[string]page{}
	for _, name := range []string{route.Activity, "deposits_withdrawals", "positions_closed"} {
		for _, w := range sim.Wallets() {
			if p, n := get(name, w, ""); n > 0 {
				pages[name] = p
				break
			}
		}
		if _, ok := pages[name]; !ok {
			t.Fatalf("no wallet of the simulation has a %s page with items", name)
		}
	}
	pages["tx"], _ = get("tx", sim.TradeTxs()[0], "")
	pages["wallet_address"], _ = get("wallet_address", sim.Wallets()[0], "")
	return pages
}

// edit decodes a variant A body, changes it and encodes it again (keys
// sorted: the key order of native's answer is not legacy's).
func edit(t *testing.T, body []byte, change func(item map[string]any)) []byte {
	t.Helper()
	var v map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	if change != nil {
		item := v["data"].(map[string]any)["items"].([]any)[0].(map[string]any)
		change(item)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// nativeServer replays variant A answers by target, with faults; it
// counts the calls and refuses any without the edge's credential.
type nativeServer struct {
	srv   *httptest.Server
	calls atomic.Int64
}

func newNativeServer(t *testing.T, handle func(w http.ResponseWriter, r *http.Request)) *nativeServer {
	ns := &nativeServer{}
	ns.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ns.calls.Add(1)
		if r.Header.Get("Authorization") != "Bearer "+credential {
			http.Error(w, `{"message":"bad credential"}`, http.StatusUnauthorized)
			return
		}
		handle(w, r)
	}))
	t.Cleanup(ns.srv.Close)
	return ns
}

func writeJSON(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func TestShadowReportsExactlyTheDifferences(t *testing.T) {
	pages := legacyPages(t)
	var oldAmount, newAmount string
	answers := map[string][]byte{
		pages[route.Activity].target: edit(t, pages[route.Activity].body, nil),
		pages["deposits_withdrawals"].target: edit(t, pages["deposits_withdrawals"].body, func(item map[string]any) {
			oldAmount = item["amount"].(string)
			newAmount = oldAmount + "1" // still a decimal: no contract break
			item["amount"] = newAmount
		}),
		pages["positions_closed"].target: edit(t, pages["positions_closed"].body, func(item map[string]any) {
			delete(item, "realizedPnl")
		}),
	}
	ns := newNativeServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch target := r.URL.RequestURI(); {
		case target == pages["tx"].target:
			http.Error(w, `{"message":"boom","status_code":"500","data":null}`, http.StatusInternalServerError)
		case target == pages["wallet_address"].target:
			<-r.Context().Done() // slower than native.timeout
		case answers[target] != nil:
			writeJSON(w, answers[target])
		default:
			http.NotFound(w, r)
		}
	})
	h := newHarness(t, ns.srv.URL, func(c *native.Config) {
		c.Timeout = 300 * time.Millisecond
		c.Routes = map[string]native.RouteConfig{}
		for _, name := range []string{route.Activity, "deposits_withdrawals", "positions_closed", "tx", "wallet_address"} {
			c.Routes[name] = native.RouteConfig{Mode: native.ModeShadow}
		}
	})
	for _, p := range pages {
		h.b.Shadow(p.route, true, p.body, p.target)
	}
	// A fresh page is counted, not fetched.
	h.b.Shadow(route.Activity, false, pages[route.Activity].body, pages[route.Activity].target)
	// A legacy route shadows nothing.
	h.b.Shadow("positions_open", true, pages[route.Activity].body, "/v1/anything")

	testkit.Eventually(t, "every comparison done", func() bool {
		n := int64(0)
		for _, r := range h.b.Report().Routes {
			n += r.Compared + r.NativeErrors
		}
		return n == 5
	})
	if got := ns.calls.Load(); got != 5 {
		t.Errorf("native called %d times, want 5 (the fresh page and the legacy route are not fetched)", got)
	}

	type want struct {
		equal, different, breaks, errs, skipped int64
		paths                                   []native.PathCount
		result                                  string
	}
	for name, w := range map[string]want{
		route.Activity:         {equal: 1, skipped: 1, paths: []native.PathCount{}, result: "ok"},
		"deposits_withdrawals": {different: 1, paths: []native.PathCount{{Path: "data.items[].amount", Count: 1}}, result: "ok"},
		"positions_closed":     {breaks: 1, paths: []native.PathCount{{Path: "data.items[].realizedPnl", Count: 1}}, result: "contract_break"},
		"tx":                   {errs: 1, paths: []native.PathCount{}, result: "5xx"},
		"wallet_address":       {errs: 1, paths: []native.PathCount{}, result: "timeout"},
	} {
		r := h.route(t, name)
		if r.Equal != w.equal || r.Different != w.different || r.ContractBreaks != w.breaks || r.NativeErrors != w.errs || r.Skipped != w.skipped {
			t.Errorf("%s: equal %d different %d breaks %d errors %d skipped %d, want %+v", name, r.Equal, r.Different, r.ContractBreaks, r.NativeErrors, r.Skipped, w)
		}
		if fmt.Sprint(r.TopPaths) != fmt.Sprint(w.paths) {
			t.Errorf("%s: paths %v, want %v", name, r.TopPaths, w.paths)
		}
		if r.Requests[w.result] != 1 || len(r.Requests) != 1 {
			t.Errorf("%s: requests %v, want one %s", name, r.Requests, w.result)
		}
		if got := metric(t, h.reg, "tradergate_native_requests_total", name, w.result); got != 1 {
			t.Errorf("%s: tradergate_native_requests_total{result=%q} = %v, want 1", name, w.result, got)
		}
	}
	dep := h.route(t, "deposits_withdrawals")
	if len(dep.Recent) != 1 || dep.Recent[0].Legacy != `"`+oldAmount+`"` || dep.Recent[0].Native != `"`+newAmount+`"` || !dep.Recent[0].At.Equal(h.clock.Now()) {
		t.Errorf("recent differences %+v, want amount %s -> %s", dep.Recent, oldAmount, newAmount)
	}
	pos := h.route(t, "positions_closed")
	if len(pos.Recent) != 1 || pos.Recent[0].Native != native.Absent {
		t.Errorf("recent differences %+v, want realizedPnl absent on native", pos.Recent)
	}
	for outcome, n := range map[string]float64{"equal": 1, "skipped": 1, "different": 0} {
		if got := metric(t, h.reg, "tradergate_native_comparisons_total", route.Activity, outcome); got != n {
			t.Errorf("comparisons{activity,%s} = %v, want %v", outcome, got, n)
		}
	}

	// The report as GET /shadow serves it: JSON, and no credential.
	srv := httptest.NewServer(h.b)
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Get(srv.URL + "/shadow")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rep native.Report
	if err := json.Unmarshal(body, &rep); err != nil || resp.StatusCode != 200 || rep.Scope != "replica" || !rep.Enabled {
		t.Errorf("GET /shadow: %d %v scope %q enabled %v", resp.StatusCode, err, rep.Scope, rep.Enabled)
	}
	if bytes.Contains(body, []byte(credential)) || bytes.Contains(body, []byte("Bearer")) {
		t.Errorf("the report holds the credential")
	}
	if !bytes.Contains(body, []byte(`"path": "data.items[].amount"`)) {
		t.Errorf("report lacks the differing path:\n%s", body)
	}
}

// metric is the value of one series of a counter or gauge vector on reg
// (0 when absent); value matches its result or outcome label, "" any.
func metric(t *testing.T, reg *prometheus.Registry, name, routeName, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] == routeName && (value == "" || labels["result"] == value || labels["outcome"] == value) {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func TestCanaryIsStickyPerKey(t *testing.T) {
	h := newHarness(t, "http://native.invalid", func(c *native.Config) {
		c.Routes = map[string]native.RouteConfig{"tx": {Mode: native.ModeCanary, Percent: 30}}
	})
	const keys = 10000
	sides := make([]native.Side, keys)
	toNative := 0
	for i := range keys {
		sides[i] = h.b.Decide("tx", fmt.Sprintf("key-%d", i))
		if sides[i] == native.Native {
			toNative++
		}
	}
	if share := float64(toNative) / keys; share < 0.25 || share > 0.35 {
		t.Errorf("%.3f of keys went to native, want 0.30 ± 0.05", share)
	}
	for i := range keys {
		if got := h.b.Decide("tx", fmt.Sprintf("key-%d", i)); got != sides[i] {
			t.Fatalf("key-%d went to %v, then to %v", i, sides[i], got)
		}
	}
	if h.b.Decide(route.Activity, "key-1") != native.Legacy || h.b.Decide("no_such_route", "key-1") != native.Legacy {
		t.Errorf("a legacy or unknown route went to native")
	}
}

func TestNativeFetchServesAndFailsOver(t *testing.T) {
	pages := legacyPages(t)
	p := pages[route.Activity]
	broken := edit(t, p.body, func(item map[string]any) { item["price"] = 0.5 }) // a number: the contract wants a string
	ns := newNativeServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("variant") {
		case "broken":
			writeJSON(w, broken)
		case "text":
			_, _ = io.WriteString(w, "<html>")
		default:
			writeJSON(w, p.body)
		}
	})
	h := newHarness(t, ns.srv.URL, func(c *native.Config) {
		c.Routes = map[string]native.RouteConfig{route.Activity: {Mode: native.ModeNative}}
	})
	if h.b.Decide(route.Activity, "any") != native.Native {
		t.Fatal("native mode did not decide native")
	}
	body, err := h.b.Fetch(context.Background(), route.Activity, p.target, nil)
	if err != nil || !bytes.Equal(body, p.body) {
		t.Fatalf("Fetch: %v", err)
	}
	sep := "?"
	if strings.Contains(p.target, "?") {
		sep = "&"
	}
	for variant, want := range map[string]native.Result{"broken": native.ContractBreak, "text": native.BadBody} {
		_, err := h.b.Fetch(context.Background(), route.Activity, p.target+sep+"variant="+variant, nil)
		var e *native.Error
		if !errors.As(err, &e) || e.Result != want {
			t.Errorf("%s: error %v, want result %v", variant, err, want)
		}
	}
	// The caller's own check refuses a body that kept the contract.
	var seen []byte
	refuse := func(body []byte) error { seen = body; return errors.New("not for the cache") }
	if _, err := h.b.Fetch(context.Background(), route.Activity, p.target, refuse); !errors.As(err, new(*native.Error)) ||
		err.(*native.Error).Result != native.BadBody || !bytes.Equal(seen, p.body) {
		t.Errorf("a body the caller refuses: %v, want result bad_body", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var e *native.Error
	if _, err := h.b.Fetch(ctx, route.Activity, p.target, nil); !errors.As(err, &e) || e.Result != native.Canceled {
		t.Errorf("a canceled caller: %v, want result canceled", err)
	}
	r := h.route(t, route.Activity)
	if r.Requests["ok"] != 1 || r.Requests["contract_break"] != 1 || r.Requests["bad_body"] != 2 || r.Requests["canceled"] != 1 {
		t.Errorf("requests %v", r.Requests)
	}
	if r.Rollback.WindowCalls != 4 || r.Rollback.WindowErrors != 3 {
		t.Errorf("window %+v: want 4 calls (a canceled one says nothing), 3 errors", r.Rollback)
	}
}

func TestRollbackTripsWithinTheWindowAndReloadRearms(t *testing.T) {
	ns := newNativeServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusBadGateway)
	})
	h := newHarness(t, ns.srv.URL, func(c *native.Config) {
		c.Routes = map[string]native.RouteConfig{"tx": {Mode: native.ModeNative}}
		c.Rollback = native.RollbackConfig{ErrorRatio: 0.5, Window: time.Minute, MinRequests: 20}
	})
	fail := func(n int) {
		for range n {
			if _, err := h.b.Fetch(context.Background(), "tx", "/v1/tx/0x01", nil); err == nil {
				t.Fatal("a 502 was served")
			}
		}
	}
	fail(10)
	h.clock.Advance(2 * time.Minute) // those ten leave the window
	fail(19)
	if r := h.route(t, "tx"); r.Rollback.RolledBack || h.b.Decide("tx", "k") != native.Native || h.b.Shadows("tx") {
		t.Fatalf("rolled back on errors outside the window: %+v", r.Rollback)
	}
	fail(1)
	r := h.route(t, "tx")
	if !r.Rollback.RolledBack || r.EffectiveMode != native.ModeShadow || r.Mode != native.ModeNative ||
		!strings.Contains(r.Rollback.Reason, "native error ratio 1.000 (20 of 20 calls in 1m0s) passed rollback.error_ratio 0.5") ||
		r.Rollback.At == nil || !r.Rollback.At.Equal(h.clock.Now()) {
		t.Fatalf("after 20 failures in the window: %+v, effective %s", r.Rollback, r.EffectiveMode)
	}
	if h.b.Decide("tx", "k") != native.Legacy || !h.b.Shadows("tx") {
		t.Error("a rolled back route still decides native, or does not compare")
	}
	if got := metric(t, h.reg, "tradergate_native_rolled_back", "tx", ""); got != 1 {
		t.Errorf("tradergate_native_rolled_back{tx} = %v, want 1", got)
	}
	if !strings.Contains(h.log.String(), `"msg":"native route rolled back to legacy","route":"tx"`) {
		t.Errorf("no warning line:\n%s", h.log)
	}
	h.clock.Advance(time.Hour)
	if h.b.Decide("tx", "k") != native.Legacy {
		t.Error("the rollback wore off with time; only a reload re-arms it")
	}

	h.b.Reload(h.cfg)
	r = h.route(t, "tx")
	if r.Rollback.RolledBack || r.EffectiveMode != native.ModeNative || h.b.Decide("tx", "k") != native.Native {
		t.Errorf("after reload: %+v effective %s", r.Rollback, r.EffectiveMode)
	}
	if got := metric(t, h.reg, "tradergate_native_rolled_back", "tx", ""); got != 0 {
		t.Errorf("tradergate_native_rolled_back{tx} = %v after reload, want 0", got)
	}
}

func TestRollbackOnDifferencesKeepsShadowing(t *testing.T) {
	pages := legacyPages(t)
	p := pages["deposits_withdrawals"]
	changed := edit(t, p.body, func(item map[string]any) { item["amount"] = item["amount"].(string) + "7" })
	ns := newNativeServer(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, changed) })
	h := newHarness(t, ns.srv.URL, func(c *native.Config) {
		c.Routes = map[string]native.RouteConfig{"deposits_withdrawals": {Mode: native.ModeCanary, Percent: 100}}
		c.Rollback = native.RollbackConfig{DiffRatio: 0.5, MinRequests: 3}
	})
	for i := range 5 {
		h.b.Shadow("deposits_withdrawals", true, p.body, p.target)
		testkit.Eventually(t, "comparison done", func() bool { return h.route(t, "deposits_withdrawals").Different == int64(i+1) })
	}
	r := h.route(t, "deposits_withdrawals")
	if !r.Rollback.RolledBack || !strings.Contains(r.Rollback.Reason, "difference ratio 1.000 (3 of 3 comparisons") {
		t.Errorf("rollback %+v", r.Rollback)
	}
	if r.Different != 5 || h.b.Decide("deposits_withdrawals", "k") != native.Legacy {
		t.Errorf("different %d: the comparisons go on after the rollback, clients on legacy", r.Different)
	}
}

func TestShadowQueueFullDropsAndCounts(t *testing.T) {
	entered, release := make(chan struct{}, 8), make(chan struct{})
	ns := newNativeServer(t, func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		writeJSON(w, []byte(`{"message":"OK","status_code":"1","data":null}`))
	})
	h := newHarness(t, ns.srv.URL, func(c *native.Config) {
		c.Routes = map[string]native.RouteConfig{"tx": {Mode: native.ModeShadow}}
		c.Shadow = native.ShadowConfig{Workers: 1, Queue: 1}
	})
	legacy := []byte(`{"message":"OK","status_code":"1","data":null}`)
	h.b.Shadow("tx", true, legacy, "/v1/tx/0x01")
	<-entered // the one worker is busy
	for range 4 {
		h.b.Shadow("tx", true, legacy, "/v1/tx/0x01") // one queued, three dropped
	}
	if r := h.route(t, "tx"); r.Dropped != 3 {
		t.Errorf("dropped %d, want 3", r.Dropped)
	}
	if got := metric(t, h.reg, "tradergate_native_shadow_dropped_total", "tx", ""); got != 3 {
		t.Errorf("tradergate_native_shadow_dropped_total{tx} = %v, want 3", got)
	}
	close(release)
	testkit.Eventually(t, "both comparisons done", func() bool { return h.route(t, "tx").Equal == 2 })
}

func TestCloseLeavesNoGoroutine(t *testing.T) {
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	ns := newNativeServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	})
	cfg := native.Config{BaseURL: ns.srv.URL, KeyEnv: "K", Routes: map[string]native.RouteConfig{"tx": {Mode: native.ModeShadow}}}
	cfg.ApplyDefaults()
	cfg.Validate(env(map[string]string{"K": credential}))
	b, err := native.New(cfg, native.Options{Routes: route.NewTable().Routes()})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		b.Shadow("tx", true, []byte(`{}`), "/v1/tx/0x01") // in flight and queued
	}
	testkit.Eventually(t, "a comparison in flight", func() bool { return ns.calls.Load() > 0 })
	b.Close()
	b.Shadow("tx", true, []byte(`{}`), "/v1/tx/0x01") // after Close: dropped
	if r := b.Report().Routes; r == nil {
		t.Fatal("no report after Close")
	}
	// goleak (TestMain) checks that the workers and connections are gone.
}
