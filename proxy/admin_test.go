package proxy_test

import (
	"net/http"
	"testing"

	"tradergate/internal/testkit"
	"tradergate/proxy"
)

// With admin.token_env set, every admin path but the health checks needs
// the token; a missing or wrong one is a 401.
func TestAdminToken(t *testing.T) {
	const token = "admin-token-0123456789"
	e := newEdge(t, withConfig(func(c *proxy.Config) {
		c.Admin.Listen = "127.0.0.1:0"
		c.Admin.Pprof = true
		c.Admin.TokenEnv = "TEST_ADMIN_TOKEN"
	}), withEnv("TEST_ADMIN_TOKEN", token))
	testkit.Eventually(t, "the admin listener", func() bool { return e.srv.AdminAddr() != "" })
	base := "http://" + e.srv.AdminAddr()
	get := func(path, auth string) int {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/metrics", "/debug/pprof/", "/debug/pprof/cmdline", "/status", "/anything"} {
		for _, auth := range []string{"", "Bearer wrong-token-0123456789", "Bearer " + token + "x", token, "Basic " + token} {
			if got := get(path, auth); got != http.StatusUnauthorized {
				t.Errorf("%s with %q: %d, want 401", path, auth, got)
			}
		}
	}
	if got := get("/metrics", "Bearer "+token); got != 200 {
		t.Errorf("/metrics with the token: %d", got)
	}
	if got := get("/debug/pprof/cmdline", "Bearer "+token); got != 200 {
		t.Errorf("/debug/pprof/cmdline with the token: %d", got)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if got := get(path, ""); got != 200 {
			t.Errorf("%s without a token: %d, want 200", path, got)
		}
	}
}

func TestAdminTokenMustBeSet(t *testing.T) {
	cfg, err := proxy.ParseConfig([]byte(testConfig("http://127.0.0.1:1/open-api") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Admin.Listen, cfg.Admin.TokenEnv = "0.0.0.0:9090", "UNSET_ADMIN_TOKEN"
	err = cfg.Validate(func(k string) string {
		if k == "TRADERGATE_UPSTREAM_KEY" {
			return "k"
		}
		return ""
	})
	if err == nil || err.Error() != "admin.token_env: environment variable UNSET_ADMIN_TOKEN must hold a token of at least 16 characters" {
		t.Errorf("Validate: %v", err)
	}
}
