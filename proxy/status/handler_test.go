package status

import (
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/status.json from the handler's output")

// get serves one request to h and returns the answer.
func get(t *testing.T, h http.Handler, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	res := rec.Result()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

// TestStatusJSONGolden pins the schema of /status.json: a change to it
// shows here as a diff to review (go test -run Golden -update rewrites it).
func TestStatusJSONGolden(t *testing.T) {
	h := Handler(fixture, Options{})
	res, body := get(t, h, "/status.json")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	golden := filepath.Join("testdata", "status.json")
	if *update {
		if err := os.WriteFile(golden, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if body != string(want) {
		t.Errorf("/status.json differs from %s (run with -update after reviewing):\n%s", golden, body)
	}
	// It is the Snapshot, whole: it reads back into one.
	var s Snapshot
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatal(err)
	}
	if s.Health.State != red || s.Route("activity").Breaker != breakerOpen || s.TLS[1].DaysLeft != 12 {
		t.Errorf("decoded: health %+v, activity %+v, certs %+v", s.Health, s.Route("activity"), s.TLS)
	}
}

func TestAssess(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Snapshot)
		state  string
		reason string
	}{
		{"fine", func(*Snapshot) {}, green, ""},
		{"not ready", func(s *Snapshot) { s.Ready = false }, red, "not ready"},
		{"breaker open", func(s *Snapshot) { s.Route("tx").Breaker = breakerOpen }, red, "breaker open: tx"},
		{"breaker half-open", func(s *Snapshot) { s.Route("tx").Breaker = breakerHalfOpen }, amber, "breaker half-open: tx"},
		{"5xx", func(s *Snapshot) { s.Totals.ErrorsPerSec = 6 }, red, "6.0 % of answers are 5xx"},
		{"some 5xx", func(s *Snapshot) { s.Totals.ErrorsPerSec = 2 }, amber, "2.0 % of answers are 5xx"},
		{"reload failed", func(s *Snapshot) { s.Config.ReloadOK = false }, amber, "reload failed"},
		{"certificate soon", func(s *Snapshot) { s.TLS[0].NotAfter = taken.AddDate(0, 0, 10) }, amber, "expires in 10 days"},
		{"certificate expired", func(s *Snapshot) { s.TLS[0].NotAfter = taken.AddDate(0, 0, -1) }, red, "certificate expired"},
		{"store down", func(s *Snapshot) { s.Limits.Store = StoreDown }, red, "store down"},
		{"redis unreachable", func(s *Snapshot) { s.Cache.L2.Breaker = breakerOpen }, amber, "Redis unreachable"},
		{"in flight", func(s *Snapshot) { s.Upstream.InFlight = 60 }, amber, "near the limit"},
		{"replica down", func(s *Snapshot) { s.Fleet.Replicas = []replica{{ID: "edge-9"}} }, amber, "replica not ready: edge-9"},
		{"native fine", func(s *Snapshot) { s.Native = &Native{Routes: []NativeRoute{{Name: "tx", Mode: "native"}}} }, green, ""},
		{"native rolled back", func(s *Snapshot) {
			s.Native = &Native{Routes: []NativeRoute{{Name: "tx", Mode: "native", RolledBack: true}, {Name: "activity", Mode: "canary", RolledBack: true}}}
		}, amber, "native rolled back to legacy: tx, activity"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Snapshot{
				Ready: true, Taken: taken, Config: Config{ReloadOK: true},
				Routes:   []Route{{Name: "tx", Breaker: BreakerClosed}},
				Totals:   figures{RequestsPerSec: 100},
				TLS:      []Cert{{Names: []string{"a.example"}, NotAfter: taken.AddDate(0, 3, 0)}},
				Limits:   limitsView{Store: StoreOK},
				Cache:    cacheView{L2: L2{Present: true, Breaker: BreakerClosed}},
				Upstream: upstreamView{MaxConcurrent: 64},
			}
			tc.change(&s)
			assess(&s)
			if s.Health.State != tc.state {
				t.Errorf("state %q, want %q (%v)", s.Health.State, tc.state, s.Health.Reasons)
			}
			if got := strings.Join(s.Health.Reasons, "; "); tc.reason == "" && got != "" || !strings.Contains(got, tc.reason) {
				t.Errorf("reasons %q, want one with %q", got, tc.reason)
			}
		})
	}
}

// marker stands for an API key and the upstream credential: it must never
// reach the page, whichever field carries it.
const marker = "tg-live-7f3a9c2e51d04b8e"

func TestNoKeyMaterial(t *testing.T) {
	leaky := func() Snapshot {
		s := fixture()
		s.Config.ReloadError = "keys[3]: duplicate key " + marker
		s.Upstream.LastError = `GET https://legacy.example/open-api/v1/tx?apikey=` + marker + `: timeout`
		s.Limits.TopKeys[0].KeyID = marker
		s.Fleet.Replicas[1].ID = "edge-" + marker
		return s
	}
	h := Handler(leaky, Options{Secrets: func() []string { return []string{marker, "short"} }})
	for _, path := range []string{"/", "/status", "/status.json"} {
		_, body := get(t, h, path)
		if strings.Contains(body, marker) || strings.Contains(body, marker[3:]) {
			t.Errorf("%s shows the secret", path)
		}
		if !strings.Contains(body, redacted) {
			t.Errorf("%s: no %s where the secret was", path, redacted)
		}
	}
	// Redacting works on a copy: the edge's snapshot is untouched.
	s := leaky()
	if _, _ = get(t, Handler(func() Snapshot { return s }, Options{Secrets: func() []string { return []string{marker} }}), "/"); s.Limits.TopKeys[0].KeyID != marker {
		t.Error("the handler wrote into the source's snapshot")
	}
}

func TestPageEscapesText(t *testing.T) {
	h := Handler(func() Snapshot {
		s := fixture()
		s.Config.ReloadOK = false
		s.Config.ReloadError = `<script>alert("x")</script>`
		return s
	}, Options{})
	_, body := get(t, h, "/")
	if strings.Contains(body, `<script>alert`) || !strings.Contains(body, `&lt;script&gt;alert`) {
		t.Error("the reload error reached the page unescaped")
	}
}

func TestPageWithoutJavaScript(t *testing.T) {
	h := Handler(fixture, Options{})
	res, body := get(t, h, "/status")
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("status %d, content type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	csp := res.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'sha256-") {
		t.Errorf("policy %q", csp)
	}
	// The figures are in the HTML itself, formatted, not left for a
	// script to fill in.
	for _, want := range []string{"Failing", "breaker open: activity", "91.2 %", "187.0 MiB", "256.0 MiB", "48,213", "120.4/s", "4.80 s", "2.1 ms", "72", "acme-prod", "3 d 4 h", "edge-3", "12",
		"native rolled back to legacy: tx", "passed rollback.error_ratio 0.05", "40,210", "canary 30%"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if _, root := get(t, h, "/"); root != body {
		t.Error("/ and /status differ")
	}
	if res, _ := get(t, h, "/other"); res.StatusCode != http.StatusNotFound {
		t.Errorf("/other: %d", res.StatusCode)
	}
}

func TestFormats(t *testing.T) {
	tests := []struct{ got, want string }{
		{pct(0.9123), "91.2 %"}, {pct(0), "0.0 %"},
		{rate(0.04), "0.0/s"}, {rate(1.25), "1.3/s"}, {fixed(2.5, 0), "3"}, {fixed(-2.5, 0), "-3"}, {fixed(1.15, 1), "1.1"}, {rate(12.34), "12.3/s"}, {rate(1234.6), "1,235/s"},
		{dur(0), "–"}, {dur(0.00025), "250 µs"}, {dur(0.0125), "12.5 ms"}, {dur(1.25), "1.25 s"},
		{size(512), "512 B"}, {size(1536), "1.5 KiB"}, {size(187 << 20), "187.0 MiB"},
		{count(0), "0"}, {count(999), "999"}, {count(1234567), "1,234,567"}, {count(-1234), "-1,234"},
		{span(42), "42 s"}, {span(725), "12 min 5 s"}, {span(15120), "4 h 12 min"}, {span(274320), "3 d 4 h"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	if got := ago(taken.Add(-3*time.Second), taken); got != "3 s ago" {
		t.Errorf("ago: %q", got)
	}
	if got := ago(time.Time{}, taken); got != "never" {
		t.Errorf("ago of zero: %q", got)
	}
}

// A route the edge builds from other routes' pages has no breaker: the
// page says "none", uncoloured, rather than a green "closed".
func TestPageRouteWithoutBreaker(t *testing.T) {
	h := Handler(fixture, Options{})
	_, body := get(t, h, "/status")
	i := strings.Index(body, `<tr data-route="orderbook_book">`)
	if i < 0 {
		t.Fatal("no row for orderbook_book")
	}
	row, _, _ := strings.Cut(body[i:], "</tr>")
	if !strings.Contains(row, `<span class="badge breaker" `) || !strings.Contains(row, `>none</span>`) {
		t.Errorf("row without a breaker:\n%s", row)
	}
	if j := strings.Index(body, `<tr data-route="activity">`); j < 0 || !strings.Contains(body[j:], `badge breaker st-bad`) {
		t.Error("the open breaker of activity lost its colour")
	}
}
