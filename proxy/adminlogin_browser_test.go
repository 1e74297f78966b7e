package proxy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"tradergate/internal/testkit"
	"tradergate/internal/testkit/browsertest"
	"tradergate/proxy/config"
)

// The admin login form in a real browser: the status page without a login
// is the form; a wrong token is refused with a line saying so and no
// cookie; the right one lands on the status page with the session cookie,
// which a reload keeps using. The token is typed, never printed: no
// failure message, log line or page holds it.
func TestAdminLoginInABrowser(t *testing.T) {
	const token = "admin-token-for-the-browser-0123"
	var logs testkit.LogBuffer
	e := newEdge(t, func(s *edgeSetup) { s.logger, s.accessLog = logs.Logger(), true }, withConfig(func(c *config.Config) {
		c.Admin.Listen = "127.0.0.1:0"
		c.Admin.TokenEnv = "TEST_ADMIN_TOKEN"
	}), withEnv("TEST_ADMIN_TOKEN", token))
	testkit.Eventually(t, "the admin listener", func() bool { return e.srv.AdminAddr() != "" })
	base := "http://" + e.srv.AdminAddr()
	ctx := browsertest.Browser(t)

	// loaded checks the status and final address (after redirects) of the
	// document a navigation loaded.
	loaded := func(what string, status int, path string, resp *network.Response, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if resp.Status != int64(status) || resp.URL != base+path {
			t.Fatalf("%s: %d at %s, want %d at %s", what, resp.Status, resp.URL, status, base+path)
		}
	}
	text := func(sel string) string { t.Helper(); return browsertest.Text(t, ctx, sel) }
	// session is the admin cookie the browser holds for the listener, or
	// nil.
	session := func() *network.Cookie {
		t.Helper()
		res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/status"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res.Cookies {
			if c.Name == "tradergate_admin" {
				return c
			}
		}
		return nil
	}
	// submit types into the form and sends it, returning the document the
	// browser lands on.
	submit := func(typed string) (*network.Response, error) {
		return chromedp.RunResponse(ctx,
			chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SendKeys(chromedp.ID("token"), typed),
			chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		)
	}
	// reload asks for the page again without waiting itself (chromedp's
	// Reload does), so that RunResponse sees the load and its response.
	reload := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.Reload, page.ReloadParams{})
		return err
	})

	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(base+"/status"))
	loaded("the status page without a login", 200, "/login", resp, err)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("token"))); err != nil {
		t.Fatalf("the login form: %v", err)
	}
	if session() != nil {
		t.Fatal("a session cookie before logging in")
	}

	resp, err = submit("not-the-admin-token-0123456789")
	loaded("a wrong token", 401, "/login", resp, err)
	if got := text(`p[role="alert"]`); got != "That is not the admin token." {
		t.Errorf("after a wrong token the form says %q", got)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	browsertest.SaveArtifact(t, "admin-login-refused.png", png)
	if session() != nil {
		t.Fatal("a wrong token set a session cookie")
	}

	resp, err = submit(token)
	loaded("the right token", 200, "/status", resp, err)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("routes"))); err != nil {
		t.Fatalf("the status page after logging in: %v", err)
	}
	c := session()
	if c == nil {
		t.Fatal("no session cookie after logging in")
	}
	if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict || c.Secure || c.Path != "/" || strings.Contains(c.Value, token) {
		t.Errorf("session cookie: HttpOnly %v, SameSite %q, Secure %v, path %q, holds the token %v; want HttpOnly, Strict, not Secure over plain HTTP, /, no token",
			c.HTTPOnly, c.SameSite, c.Secure, c.Path, strings.Contains(c.Value, token))
	}
	// The page's script cannot read an HttpOnly cookie.
	if js, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.cookie")); err != nil {
		t.Errorf("document.cookie: %v", err)
	} else if strings.Contains(js, "tradergate_admin") {
		t.Error("document.cookie shows the session cookie")
	}

	resp, err = chromedp.RunResponse(ctx, reload)
	loaded("a reload", 200, "/status", resp, err)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("routes"))); err != nil {
		t.Fatalf("the status page after a reload: %v", err)
	}
	body := text("body")
	if strings.Contains(body, token) {
		t.Error("the status page shows the admin token")
	}
	if strings.Contains(logs.String(), token) {
		t.Error("the edge's log holds the admin token")
	}
}
