package proxy

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The admin token in a browser. A browser cannot send an Authorization
// header by itself, so the admin listener has a login form: GET /login
// shows it, POST /login with the right token sets a cookie and sends the
// browser to the status page. The cookie holds an HMAC of the token under
// a key of this process, never the token: a stolen cookie does not give
// the token away (nor work on another replica, or after a restart), and
// is HttpOnly, SameSite=Strict and, over TLS, Secure. It is taken as the
// token on GET and HEAD only: nothing that changes state trusts a cookie.

// adminCookie names the admin session cookie.
const adminCookie = "tradergate_admin"

// adminSessionAge is how long a login lasts.
const adminSessionAge = 12 * time.Hour

// adminAuth checks the admin token, sent as `Authorization: Bearer <token>`
// (the scheme in any case, RFC 9110 section 11.1) or, on GET and HEAD, as
// the login cookie.
type adminAuth struct {
	token   []byte
	session string // the cookie's value: hex HMAC-SHA256 of the token
}

func newAdminAuth(token string) *adminAuth {
	var key [32]byte
	_, _ = rand.Read(key[:]) // crypto/rand.Read never fails
	mac := hmac.New(sha256.New, key[:])
	mac.Write([]byte(token))
	return &adminAuth{token: []byte(token), session: hex.EncodeToString(mac.Sum(nil))}
}

// tokenIs compares a presented token with the admin token in constant time.
func (a *adminAuth) tokenIs(presented string) bool {
	return subtle.ConstantTimeCompare([]byte(presented), a.token) == 1
}

// allowed reports whether r carries the token, or the session cookie on a
// safe method.
func (a *adminAuth) allowed(r *http.Request) bool {
	if h := r.Header.Get("Authorization"); h != "" {
		key, ok := bearer(h)
		return ok && a.tokenIs(key)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	c, err := r.Cookie(adminCookie)
	return err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(a.session)) == 1
}

// require refuses, with 401, a request to next without the token; a
// browser asking for a page is sent to the login form instead.
func (a *adminAuth) require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.allowed(r) {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodGet && r.Header.Get("Authorization") == "" && strings.Contains(r.Header.Get("Accept"), "text/html") {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		w.Header()["WWW-Authenticate"] = []string{`Bearer realm="tradergate-admin"`}
		writeJSON(w, http.StatusUnauthorized, `{"status":"unauthorized"}`)
	})
}

// showLogin is GET /login.
func (a *adminAuth) showLogin(w http.ResponseWriter, r *http.Request) {
	writeLoginForm(w, http.StatusOK, "")
}

// login is POST /login: the form's token, checked; a session cookie and
// the status page when it is right, the form again when not.
func (a *adminAuth) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		writeLoginForm(w, http.StatusBadRequest, "The form could not be read.")
		return
	}
	if !a.tokenIs(r.PostForm.Get("token")) {
		writeLoginForm(w, http.StatusUnauthorized, "That is not the admin token.")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     adminCookie,
		Value:    a.session,
		Path:     "/",
		MaxAge:   int(adminSessionAge / time.Second),
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, "/status", http.StatusSeeOther)
}

// writeLoginForm sends the login form, with a line saying what went
// wrong, if anything (a fixed text: nothing the client sent is echoed).
func writeLoginForm(w http.ResponseWriter, status int, problem string) {
	page := loginHead
	if problem != "" {
		page += `<p role="alert">` + problem + `</p>`
	}
	page += loginForm
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(page)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, page)
}

const loginHead = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tradergate admin: log in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem}
input{width:100%;padding:.5rem;margin:.5rem 0;box-sizing:border-box}button{padding:.5rem 1rem}</style>
</head><body><h1>tradergate admin</h1>`

const loginForm = `<form method="post" action="/login">
<label for="token">Admin token (the value of admin.token_env)</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<button type="submit">Log in</button>
</form></body></html>
`
