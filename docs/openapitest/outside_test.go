package openapitest_test

// docs/openapi.json as tools outside Go read it: Spectral lints it with
// its OpenAPI ruleset (docs/.spectral.yaml), and a Prism proxy in front of
// a live edge validates requests and answers against it. Both are npm
// packages; .ci/run installs them and names their bin directory in
// TRADERGATE_NPM_BIN. Where they are absent a test fails under CI and
// skips elsewhere.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tradergate/docs/openapitest"
	"tradergate/legacysim"
)

// npmBinEnv names the directory holding the npm tools' executables
// (node_modules/.bin of the prefix .ci/run installs into).
const npmBinEnv = "TRADERGATE_NPM_BIN"

// npmTool is the path of the npm executable name: in $TRADERGATE_NPM_BIN,
// else in the prefix .ci/run installs into by default
// (<user cache>/tradergate/npm), else on PATH.
func npmTool(t *testing.T, name string) string {
	t.Helper()
	var dirs []string
	if d := os.Getenv(npmBinEnv); d != "" {
		dirs = append(dirs, d)
	}
	if c, err := os.UserCacheDir(); err == nil {
		dirs = append(dirs, filepath.Join(c, "tradergate", "npm", "node_modules", ".bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	msg := fmt.Sprintf("%s not found in $%s, the default npm prefix or PATH (.ci/run installs it)", name, npmBinEnv)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// spectralResult is one finding of `spectral lint -f json`.
type spectralResult struct {
	Code     string   `json:"code"`
	Message  string   `json:"message"`
	Path     []string `json:"path"`
	Severity int      `json:"severity"` // 0 error, 1 warning, 2 info, 3 hint
	Range    struct {
		Start struct {
			Line int `json:"line"`
		} `json:"start"`
	} `json:"range"`
}

// TestSpectralFindsNoProblem lints docs/openapi.json with Spectral's
// spectral:oas ruleset: no error and no warning.
func TestSpectralFindsNoProblem(t *testing.T) {
	spectral := npmTool(t, "spectral")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	report := filepath.Join(t.TempDir(), "spectral.json")
	cmd := exec.CommandContext(ctx, spectral, "lint", "--ruleset", "../.spectral.yaml",
		"--format", "json", "--output", report, "--fail-severity", "error", "../openapi.json")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("spectral: %v\n%s", err, out)
	}
	js, rerr := os.ReadFile(report)
	var results []spectralResult
	if rerr != nil || json.Unmarshal(js, &results) != nil {
		t.Fatalf("spectral (%v) wrote no JSON report: %v\n%s\n%s", err, rerr, js, out)
	}
	for _, r := range results {
		line := fmt.Sprintf("%d: %s %s (%s)", r.Range.Start.Line+1, r.Code, r.Message, strings.Join(r.Path, "."))
		if r.Severity <= 1 {
			t.Error(line)
		} else {
			t.Log(line)
		}
	}
	if err != nil && !t.Failed() {
		t.Fatalf("spectral failed without a finding: %v\n%s", err, out)
	}
}

// startOutsideEdge is the test edge (newEdge) with the legacy paths on and
// an upstream timeout short enough to reach 504.
func startOutsideEdge(t *testing.T) *edge {
	t.Helper()
	return newEdgeWith(t, "1s", legacyOn)
}

// legacyOn is the configuration section that serves the legacy paths.
const legacyOn = `legacy:
  enabled: true
  deprecation: 2026-01-01T00:00:00Z
  sunset: 2099-01-01T00:00:00Z
  guide_url: https://example.com/migrate
`

// prism is a running `prism proxy` process.
type prism struct {
	url string
	log string // file of its output
}

// startPrism runs `prism proxy docs/openapi.json <upstream> --errors` on
// a loopback port of its choosing, with the extra flags, until the test
// ends. With --errors, a request or answer that breaks the document is
// answered with Prism's own error (application/problem+json) and an
// sl-violations header.
func startPrism(t *testing.T, upstream string, flags ...string) *prism {
	t.Helper()
	bin := npmTool(t, "prism")
	logPath := filepath.Join(t.TempDir(), "prism.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"proxy", "../openapi.json", upstream, "--errors",
		"--host", "127.0.0.1", "--port", "0", "--cors=false", "--multiprocess=false"}, flags...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = w, w
	// Node refuses request headers over 16 KiB itself; the edge's own
	// limit is what is tested.
	cmd.Env = append(os.Environ(), "NODE_OPTIONS=--max-http-header-size=65536")
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	listening := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		defer r.Close()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logFile, line)
			if _, addr, ok := strings.Cut(line, "Prism is listening on "); ok {
				select {
				case listening <- strings.TrimSpace(addr):
				default:
				}
			}
		}
		_, _ = io.Copy(logFile, r)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
			<-copied
			logFile.Close()
		})
	}
	t.Cleanup(stop)
	select {
	case addr := <-listening:
		return &prism{url: addr, log: logPath}
	case <-copied:
		stop()
		out, _ := os.ReadFile(logPath)
		t.Fatalf("prism exited before listening:\n%s", out)
	case <-time.After(2 * time.Minute):
		stop()
		out, _ := os.ReadFile(logPath)
		t.Fatalf("prism did not listen within 2 minutes:\n%s", out)
	}
	return nil
}

// outsideCase is one request through Prism and the status the edge gives.
type outsideCase struct {
	name    string
	method  string // "" is GET
	path    string
	key     string // "" is the all-routes key, "-" none
	headers []string
	status  int
	faults  *legacysim.Faults // set on the legacy host for this request
}

// send sends c through p and fails t when Prism reports a violation or
// the status is not the edge's expected one.
func (p *prism) send(t *testing.T, client *http.Client, c outsideCase) {
	t.Helper()
	_, resp, body := outsideDo(t, client, p.url, c)
	method, target := resp.Request.Method, excerptOf([]byte(c.path), 200)
	if v := resp.Header.Get("sl-violations"); v != "" {
		t.Errorf("%s %s: %d, Prism's violations: %s\nbody: %s", method, target, resp.StatusCode, v, excerptOf(body, 1024))
		return
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/problem+json") {
		t.Errorf("%s %s: Prism answered itself, %d: %s", method, target, resp.StatusCode, excerptOf(body, 1024))
		return
	}
	if resp.StatusCode != c.status {
		t.Errorf("%s %s: status %d, want %d: %s", method, target, resp.StatusCode, c.status, excerptOf(body, 1024))
	}
}

// outsideDo sends c to base and returns the request, the answer and its
// body.
func outsideDo(t *testing.T, client *http.Client, base string, c outsideCase) (*http.Request, *http.Response, []byte) {
	t.Helper()
	method := c.method
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequest(method, base+c.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	switch c.key {
	case "":
		req.Header.Set("Authorization", "Bearer "+keyAll)
	case "-":
	default:
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	for i := 0; i+1 < len(c.headers); i += 2 {
		req.Header.Set(c.headers[i], c.headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return req, resp, body
}

// excerptOf keeps a failure message readable: b, cut at max bytes.
func excerptOf(b []byte, max int) string {
	if len(b) > max {
		return fmt.Sprintf("%s... (%d bytes)", b[:max], len(b))
	}
	return string(b)
}

// run sends every case in order, each in a subtest, setting and clearing
// the legacy host's faults around it.
func (p *prism) run(t *testing.T, e *edge, cases []outsideCase) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.faults != nil {
				e.sim.SetFaults(*c.faults)
				defer e.sim.SetFaults(legacysim.Faults{})
			}
			p.send(t, client, c)
		})
	}
	if t.Failed() {
		out, _ := os.ReadFile(p.log)
		if len(out) > 32<<10 {
			out = out[len(out)-32<<10:]
		}
		t.Logf("prism's log (tail):\n%s", out)
	}
}

// TestPrismFindsNoViolation sends requests covering every route, both
// methods, the legacy paths and every error status the edge answers,
// through Prism proxies in front of a live edge: none may break
// docs/openapi.json. Requests the document allows go through a Prism
// that validates both requests and answers; the requests it refuses on
// purpose (the 400s) go through one that validates answers only, since
// a validating Prism answers them itself.
func TestPrismFindsNoViolation(t *testing.T) {
	e := startOutsideEdge(t)
	upstream := e.url
	m := e.sim.Markets()[0]
	tok := m.Tokens[0]
	w := e.sim.Wallets()[0]
	tx := e.sim.TradeTxs()[0]
	combo := e.sim.ComboTxs()[0]
	var signer string
	for s := range e.sim.Signers() {
		signer = s
		break
	}
	fault := func(route string, status int) *legacysim.Faults {
		return &legacysim.Faults{Route: route, FailStatus: status, RetryAfter: 1}
	}
	slow := &legacysim.Faults{Route: "tx", Latency: 3 * time.Second}

	var valid, heads []outsideCase
	routes := []struct{ name, path string }{
		{"orderbook_events", "/v1/orderbook/events?tokenId=" + tok + "&limit=200"},
		{"orderbook_events book", "/v1/orderbook/events?tokenId=" + tok + "&eventType=book&order=desc&limit=1"},
		{"orderbook_events price_change", "/v1/orderbook/events?conditionId=" + m.ConditionID + "&eventType=price_change&limit=20"},
		{"activity", "/v1/trader/" + w + "/activity?limit=100"},
		{"deposits_withdrawals", "/v1/trader/" + w + "/deposits-withdrawals?limit=100"},
		{"combo_positions_closed", "/v1/trader/" + w + "/combo-positions/closed?limit=100"},
		{"positions_closed", "/v1/trader/" + w + "/positions/closed?limit=100"},
		{"positions_open", "/v1/trader/" + w + "/positions/open?limit=100"},
		{"tx trade", "/v1/tx/" + tx},
		{"tx combo", "/v1/tx/" + combo},
		{"tx unknown", "/v1/tx/0x" + strings.Repeat("ab", 32)},
		{"wallet_address", "/v1/trader/wallet-address/" + signer},
		{"wallet_address none", "/v1/trader/wallet-address/0x" + strings.Repeat("0", 40)},
		{"orderbook_book", "/v1/orderbook/book?tokenId=" + tok},
	}
	for _, r := range routes {
		valid = append(valid, outsideCase{name: "GET " + r.name, path: r.path, status: 200})
		heads = append(heads, outsideCase{name: r.name, method: http.MethodHead, path: r.path, status: 200})
		if legacy, ok := strings.CutPrefix(r.path, "/v1/"); ok && r.name != "orderbook_book" {
			valid = append(valid, outsideCase{name: "legacy GET " + r.name, path: "/open-api/v1/" + legacy, status: 200})
			heads = append(heads, outsideCase{name: "legacy " + r.name, method: http.MethodHead, path: "/open-api/v1/" + legacy, status: 200})
		}
	}
	heads = append(heads, []outsideCase{
		{name: "openapi.json", method: http.MethodHead, path: "/v1/openapi.json", key: "-", status: 200},
		{name: "304", method: http.MethodHead, path: "/v1/tx/" + combo, headers: []string{"If-None-Match", "*"}, status: 304},
		{name: "401", method: http.MethodHead, path: "/v1/tx/" + tx, key: "not-a-key", status: 401},
		{name: "403", method: http.MethodHead, path: "/v1/trader/" + w + "/activity", key: keyTxOnly, status: 403},
		{name: "400", method: http.MethodHead, path: "/v1/trader/0x12/activity", status: 400},
		{name: "legacy 401", method: http.MethodHead, path: "/open-api/v1/tx/" + tx, key: "not-a-key", status: 401},
	}...)
	valid = append(valid, []outsideCase{
		{name: "openapi.json", path: "/v1/openapi.json", key: "-", status: 200},
		{name: "304", path: "/v1/tx/" + combo, headers: []string{"If-None-Match", "*"}, status: 304},
		{name: "legacy 304", path: "/open-api/v1/tx/" + combo, headers: []string{"If-None-Match", "*"}, status: 304},
		{name: "401 unknown key", path: "/v1/tx/" + tx, key: "not-a-key", status: 401},
		{name: "legacy 401 unknown key", path: "/open-api/v1/tx/" + tx, key: "not-a-key", status: 401},
		{name: "403", path: "/v1/trader/" + w + "/activity", key: keyTxOnly, status: 403},
		{name: "legacy 403", path: "/open-api/v1/trader/" + w + "/activity", key: keyTxOnly, status: 403},
		{name: "404 of the legacy host", path: "/v1/trader/" + w + "/activity?limit=7", faults: fault("activity", 404), status: 404},
		{name: "legacy 404 of the legacy host", path: "/open-api/v1/trader/" + w + "/activity?limit=7", faults: fault("activity", 404), status: 404},
		{name: "404 no snapshot", path: "/v1/orderbook/book?tokenId=" + tok + "&at=0", status: 404},
		{name: "410 of the legacy host", path: "/v1/trader/" + w + "/activity?limit=8", faults: fault("activity", 410), status: 410},
		{name: "4XX of the legacy host", path: "/v1/trader/" + w + "/activity?limit=9", faults: fault("activity", 418), status: 418},
		{name: "414", path: "/v1/tx/" + tx + "?pad=" + strings.Repeat("a", 9000), status: 414},
		{name: "legacy 414", path: "/open-api/v1/tx/" + tx + "?pad=" + strings.Repeat("a", 9000), status: 414},
		{name: "431", path: "/v1/tx/" + tx, headers: []string{"X-Pad", strings.Repeat("a", 20<<10)}, status: 431},
		{name: "legacy 431", path: "/open-api/v1/tx/" + tx, headers: []string{"X-Pad", strings.Repeat("a", 20<<10)}, status: 431},
		{name: "502 legacy 5xx", path: "/v1/trader/" + w + "/positions/open?limit=3", faults: fault("positions_open", 500), status: 502},
		{name: "legacy 502", path: "/open-api/v1/trader/" + w + "/positions/open?limit=3", faults: fault("positions_open", 500), status: 502},
		{name: "502 credential", path: "/v1/trader/" + w + "/positions/open?limit=4", faults: fault("positions_open", 401), status: 502},
		{name: "504", path: "/v1/tx/0x" + strings.Repeat("cd", 32), faults: slow, status: 504},
		{name: "legacy 504", path: "/open-api/v1/tx/0x" + strings.Repeat("ce", 32), faults: slow, status: 504},
		{name: "19-digit bound", path: "/v1/orderbook/events?tokenId=" + tok + "&from=1000000000000000000", status: 200},
		{name: "openapi.json 414", path: "/v1/openapi.json?pad=" + strings.Repeat("a", 9000), key: "-", status: 414},
		// After the legacy host's 429, the edge waits its Retry-After
		// before asking it again: last.
		{name: "503 legacy 429", path: "/v1/trader/" + w + "/deposits-withdrawals?limit=5", faults: fault("deposits_withdrawals", 429), status: 503},
		{name: "legacy 503", path: "/open-api/v1/trader/" + w + "/deposits-withdrawals?limit=5", faults: fault("deposits_withdrawals", 429), status: 503},
		// The tiny key's one request, then its 429s.
		{name: "tiny key's allowance", path: "/v1/tx/" + tx, key: keyTiny, status: 200},
		{name: "429", path: "/v1/tx/" + tx, key: keyTiny, status: 429},
		{name: "legacy 429", path: "/open-api/v1/tx/" + tx, key: keyTiny, status: 429},
	}...)

	invalid := []outsideCase{
		{name: "bad address", path: "/v1/trader/0x12/activity", status: 400},
		{name: "legacy bad address", path: "/open-api/v1/trader/0x12/activity", status: 400},
		{name: "bad hash", path: "/v1/tx/0xzz", status: 400},
		{name: "bad txHash parameter", path: "/v1/trader/" + w + "/activity?txHash=12", status: 400},
		{name: "no order book filter", path: "/v1/orderbook/events?limit=5", status: 400},
		{name: "order book limit", path: "/v1/orderbook/events?tokenId=1&limit=10001", status: 400},
		{name: "page limit", path: "/v1/trader/" + w + "/positions/open?limit=101", status: 400},
		{name: "too many tokens", path: "/v1/orderbook/events?tokenId=" + strings.Repeat("1,", 51), status: 400},
		{name: "event type", path: "/v1/orderbook/events?tokenId=1&eventType=trade", status: 400},
		{name: "order", path: "/v1/orderbook/events?tokenId=1&order=up", status: 400},
		{name: "inverted range", path: "/v1/orderbook/events?tokenId=1&from=5&to=4", status: 400},
		{name: "negative bound", path: "/v1/trader/" + w + "/activity?fromBlock=-1", status: 400},
		{name: "given twice", path: "/v1/trader/" + w + "/activity?limit=1&limit=2", status: 400},
		{name: "transfer type", path: "/v1/trader/" + w + "/deposits-withdrawals?type=gift", status: 400},
		{name: "min amount", path: "/v1/trader/" + w + "/deposits-withdrawals?minAmount=1e3", status: 400},
		{name: "cursor", path: "/v1/trader/" + w + "/positions/closed?cursor=%01", status: 400},
		{name: "book without token", path: "/v1/orderbook/book", status: 400},
	}

	t.Run("valid requests", func(t *testing.T) {
		startPrism(t, upstream).run(t, e, valid)
	})
	t.Run("refused requests", func(t *testing.T) {
		startPrism(t, upstream, "--validate-request=false").run(t, e, invalid)
	})
	// Prism 5.14 reads the empty body of a HEAD answer as JSON, since its
	// Content-Type is GET's, and fails on it with a 500 of its own: HEAD
	// answers are held to the document's HEAD operations here instead.
	t.Run("HEAD", func(t *testing.T) {
		v := openapitest.New(t)
		client := &http.Client{Timeout: 30 * time.Second}
		t.Cleanup(client.CloseIdleConnections)
		for _, c := range heads {
			t.Run(c.name, func(t *testing.T) {
				req, resp, body := outsideDo(t, client, e.url, c)
				if resp.StatusCode != c.status || len(body) != 0 {
					t.Fatalf("HEAD %s: status %d with %d body bytes, want %d and none", c.path, resp.StatusCode, len(body), c.status)
				}
				v.Response(t, req, resp, body)
			})
		}
	})
}
