package proxy_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"tradergate/cache/configerr"
	"tradergate/internal/testkit"
	"tradergate/proxy/config"
)

// With admin.token_env set, every admin path but the health checks needs
// the token; a missing or wrong one is a 401.
func TestAdminToken(t *testing.T) {
	const token = "admin-token-0123456789"
	e := newEdge(t, withConfig(func(c *config.Config) {
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
	cfg, err := config.Parse([]byte(testConfig("http://127.0.0.1:1/open-api") + "\n"))
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
	var l configerr.List
	if !errors.As(err, &l) || len(l) != 1 || l[0].Detail() != "admin.token_env: environment variable UNSET_ADMIN_TOKEN must hold a token of at least 16 characters" {
		t.Errorf("Validate: %v", err)
	}
}

// An admin listener beyond loopback needs a token, or an explicit
// admin.insecure_open: a configuration without either is refused, naming
// the field.
func TestAdminOpenListenerNeedsToken(t *testing.T) {
	getenv := func(k string) string {
		if k == "TRADERGATE_UPSTREAM_KEY" {
			return "k"
		}
		return ""
	}
	for _, tc := range []struct {
		listen string
		open   bool
		ok     bool
	}{
		{"0.0.0.0:9090", false, false},
		{"192.0.2.1:9090", false, false},
		{":9090", false, false},
		{"0.0.0.0:9090", true, true},
		{"127.0.0.1:9090", false, true},
		{"[::1]:9090", false, true},
		{"localhost:9090", false, true},
	} {
		cfg, err := config.Parse([]byte(testConfig("http://127.0.0.1:1/open-api")))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Admin.Listen, cfg.Admin.InsecureOpen = tc.listen, tc.open
		err = cfg.Validate(getenv)
		if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "admin.listen: \""+tc.listen+"\" is reachable beyond this machine; set admin.token_env, or admin.insecure_open: true")) {
			t.Errorf("listen %s, insecure_open %v: %v", tc.listen, tc.open, err)
		}
	}
}

// The token is taken with the scheme in any case, as the API takes keys;
// and a browser logs in with a form: the cookie it gets holds no token,
// is HttpOnly and SameSite=Strict, and opens the pages on GET only.
func TestAdminLogin(t *testing.T) {
	const token = "admin-token-0123456789"
	e := newEdge(t, withConfig(func(c *config.Config) {
		c.Admin.Listen = "127.0.0.1:0"
		c.Admin.TokenEnv = "TEST_ADMIN_TOKEN"
	}), withEnv("TEST_ADMIN_TOKEN", token))
	testkit.Eventually(t, "the admin listener", func() bool { return e.srv.AdminAddr() != "" })
	base := "http://" + e.srv.AdminAddr()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: noRedirects}
	do := func(method, path, auth, accept string, body url.Values) (*http.Response, string) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			rd = strings.NewReader(body.Encode())
		}
		req, _ := http.NewRequest(method, base+path, rd)
		if body != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, scheme := range []string{"bearer", "BEARER", "Bearer"} {
		if resp, _ := do("GET", "/status.json", scheme+" "+token, "", nil); resp.StatusCode != 200 {
			t.Errorf("%s <token>: %d, want 200", scheme, resp.StatusCode)
		}
	}
	// A browser without the cookie is sent to the form.
	resp, _ := do("GET", "/status", "", "text/html,application/xhtml+xml", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("a browser without a login: %d to %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, page := do("GET", "/login", "", "text/html", nil)
	if resp.StatusCode != 200 || !strings.Contains(page, `<form method="post" action="/login">`) || !strings.Contains(page, `name="token"`) {
		t.Fatalf("GET /login: %d %.300s", resp.StatusCode, page)
	}
	if resp, _ := do("POST", "/login", "", "text/html", url.Values{"token": {token + "x"}}); resp.StatusCode != 401 || len(resp.Cookies()) != 0 {
		t.Fatalf("a wrong token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	resp, _ = do("POST", "/login", "", "text/html", url.Values{"token": {token}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/status" || len(resp.Cookies()) != 1 {
		t.Fatalf("the right token: %d to %q, cookies %v", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	c := resp.Cookies()[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || strings.Contains(c.Value, token) || c.Value == "" {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, not Secure over plain HTTP, and no token in it", c)
	}
	if resp, body := do("GET", "/status", "", "text/html", nil); resp.StatusCode != 200 || !strings.Contains(body, "<html") {
		t.Errorf("the status page with the cookie: %d %.200s", resp.StatusCode, body)
	}
	if resp, _ := do("GET", "/metrics", "", "", nil); resp.StatusCode != 200 {
		t.Errorf("GET /metrics with the cookie: %d", resp.StatusCode)
	}
	// Not on another method, nor with a wrong token beside it.
	if resp, _ := do("POST", "/status", "", "", url.Values{}); resp.StatusCode != 401 {
		t.Errorf("POST with the cookie: %d, want 401", resp.StatusCode)
	}
	if resp, _ := do("GET", "/status", "Bearer wrong-token-0123456789", "", nil); resp.StatusCode != 401 {
		t.Errorf("a wrong token beside the cookie: %d, want 401", resp.StatusCode)
	}
}

// The login cookie is refused by the edge once its lifetime has passed,
// by the edge's clock whatever the browser keeps, and every cookie dies
// when a reload changes the admin token.
func TestAdminLoginExpires(t *testing.T) {
	const tokenA, tokenB = "admin-token-A-0123456789", "admin-token-B-0123456789"
	env := map[string]string{"TRADERGATE_UPSTREAM_KEY": legacyKey, "ADMIN_A": tokenA, "ADMIN_B": tokenB}
	clock := testkit.NewClock(time.Date(2027, 5, 1, 9, 0, 0, 0, time.UTC))
	admin := func(c *config.Config) {
		c.Admin.Listen = "127.0.0.1:0"
		c.Admin.TokenEnv = "ADMIN_A"
		c.Admin.SessionLifetime = time.Hour
	}
	e := newEdge(t, withClock(clock.Now), withConfig(admin), withEnv("ADMIN_A", tokenA))
	testkit.Eventually(t, "the admin listener", func() bool { return e.srv.AdminAddr() != "" })
	base := "http://" + e.srv.AdminAddr()
	do := func(method, path, auth string, cookie *http.Cookie, form url.Values) *http.Response {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, base+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := (&http.Client{CheckRedirect: noRedirects}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	login := func(token string) *http.Cookie {
		t.Helper()
		resp := do("POST", "/login", "", nil, url.Values{"token": {token}})
		if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
			t.Fatalf("login: %d, cookies %v", resp.StatusCode, resp.Cookies())
		}
		return resp.Cookies()[0]
	}
	status := func(c *http.Cookie) int { t.Helper(); return do("GET", "/status.json", "", c, nil).StatusCode }

	c := login(tokenA)
	if c.MaxAge != 3600 {
		t.Errorf("cookie Max-Age %d, want 3600 (admin.session_lifetime)", c.MaxAge)
	}
	if got := status(c); got != 200 {
		t.Fatalf("a fresh login: %d", got)
	}
	clock.Advance(time.Hour - time.Second)
	if got := status(c); got != 200 {
		t.Errorf("a login one second short of its lifetime: %d, want 200", got)
	}
	clock.Advance(time.Second)
	if got := status(c); got != http.StatusUnauthorized {
		t.Errorf("a login at its lifetime: %d, want 401", got)
	}
	// The same value sent again by a browser that ignores Max-Age, and a
	// cookie whose signature is not the edge's, open nothing either.
	forged := *c
	forged.Value = strings.ToUpper(c.Value[:1]) + c.Value[1:] + "x"
	if got := status(&forged); got != http.StatusUnauthorized {
		t.Errorf("a forged cookie: %d, want 401", got)
	}

	// A reload that changes the token ends every login at once.
	c = login(tokenA)
	cfg, err := config.Parse([]byte(testConfig(e.up.URL + "/open-api")))
	if err != nil {
		t.Fatal(err)
	}
	admin(cfg)
	cfg.Admin.TokenEnv = "ADMIN_B"
	if err := cfg.Validate(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if got := status(c); got != http.StatusUnauthorized {
		t.Errorf("a login under the old token after the reload: %d, want 401", got)
	}
	if got := do("GET", "/status.json", tokenA, nil, nil).StatusCode; got != http.StatusUnauthorized {
		t.Errorf("the old token after the reload: %d, want 401", got)
	}
	if got := status(login(tokenB)); got != 200 {
		t.Errorf("a login under the new token: %d, want 200", got)
	}
}
