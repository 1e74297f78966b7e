package openapitest_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"tradergate/docs/openapitest"
	"tradergate/internal/testkit"
	"tradergate/legacysim"
	"tradergate/proxy"
	"tradergate/proxy/config"
)

// Keys of the test edge, in plain text here only.
const (
	keyAll    = "openapitest-key-all-routes"
	keyTxOnly = "openapitest-key-tx-only"
	keyTiny   = "openapitest-key-tiny-plan"
	legacyKey = "openapitest-legacy-credential"
)

// edge is tradergate in front of legacysim, both on loopback: legacysim on
// an httptest server, the edge through Server.Serve (testkit.Serve), as the
// proxy's own tests and main run it, so answers come from the production
// fronts (fasthttp for HTTP/1.1). All use of package proxy is in newEdge:
// ParseConfig, HashKey, (*Config).Validate, New, (*Server).Serve and
// (*Server).Close.
type edge struct {
	sim    *legacysim.Sim
	url    string // http://host:port of the edge
	client *http.Client
	v      *openapitest.Validator
}

func newEdge(t *testing.T) *edge {
	t.Helper()
	return newEdgeWith(t, "5s", "")
}

// newEdgeWith is newEdge with upstream.timeout set to timeout and the
// sections of extra added to the configuration.
func newEdgeWith(t *testing.T, timeout, extra string) *edge {
	t.Helper()
	return newEdgeWrapped(t, timeout, extra, nil)
}

// newEdgeWrapped is newEdgeWith with the legacy host's handler passed
// through wrap, when not nil, to fail chosen requests.
func newEdgeWrapped(t *testing.T, timeout, extra string, wrap func(http.Handler) http.Handler) *edge {
	t.Helper()
	sim := legacysim.New(legacysim.Config{Seed: 11, Key: legacyKey})
	var h http.Handler = sim
	if wrap != nil {
		h = wrap(sim)
	}
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	cfg, err := config.Parse([]byte(`
server:
  listen: "127.0.0.1:0"
admin:
  listen: "off"
upstream:
  base_url: "` + up.URL + `/open-api"
  timeout: ` + timeout + `
  retry: {max_attempts: 1}
keys:
  - {id: all, sha256: "` + proxy.HashKey(keyAll) + `", plan: pro, routes: ["*"]}
  - {id: txonly, sha256: "` + proxy.HashKey(keyTxOnly) + `", plan: pro, routes: [tx]}
  - {id: tiny, sha256: "` + proxy.HashKey(keyTiny) + `", plan: tiny, routes: ["*"]}
plans:
  pro: {requests: 100000, window: 1m}
  tiny: {requests: 1, window: 1h}
` + extra))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TRADERGATE_UPSTREAM_KEY": legacyKey}
	if err := cfg.Validate(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(cfg, proxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	addr, _, _ := testkit.Serve(t, srv)
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	return &edge{sim: sim, url: "http://" + addr, client: client, v: openapitest.New(t)}
}

// do sends method path with the given key ("" sends none) and extra
// header pairs, and returns the request, the answer and its body.
func (e *edge) do(t *testing.T, method, path, key string, headers ...string) (*http.Request, *http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.client.Do(req)
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

// check sends a GET with the all-routes key, requires status and
// validates the answer against the document.
func (e *edge) check(t *testing.T, path string, status int, headers ...string) (*http.Response, []byte) {
	t.Helper()
	return e.checkAs(t, http.MethodGet, path, keyAll, status, headers...)
}

func (e *edge) checkAs(t *testing.T, method, path, key string, status int, headers ...string) (*http.Response, []byte) {
	t.Helper()
	req, resp, body := e.do(t, method, path, key, headers...)
	if resp.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d; body %s", method, path, resp.StatusCode, status, body)
	}
	e.v.Response(t, req, resp, body)
	return resp, body
}
