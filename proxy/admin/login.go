package admin

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gorilla/securecookie"

	"tradergate/proxy/wire"
)

// The admin token in a browser. A browser cannot send an Authorization
// header by itself, so the admin listener has a login form: GET /login
// shows it, POST /login with the right token sets a cookie and sends the
// browser to the status page.
//
// The cookie holds when it was issued, by the edge's clock, signed
// (gorilla/securecookie, HMAC-SHA256) under a key made of a secret of
// this process and the admin token; never the token itself. So a stolen
// cookie does not give the token away, and it stops working when its
// lifetime (admin.session_lifetime) has passed, when the token changes
// (a reload), on another replica and after a restart. The server checks
// the lifetime: the cookie's Max-Age only tells the browser when to drop
// it. The cookie is HttpOnly, SameSite=Strict and, over TLS, Secure. It is
// taken as the token on GET and HEAD only: nothing that changes state
// trusts a cookie.

// adminCookie names the admin session cookie.
const adminCookie = "tradergate_admin"

// auth checks the admin token, sent as `Authorization: Bearer <token>`
// (the scheme in any case, RFC 9110 section 11.1) or, on GET and HEAD, as
// the login cookie. Its token and lifetime are replaced on reload
// (configure).
type auth struct {
	now    func() time.Time
	secret [32]byte // of this process: cookies die with it
	state  atomic.Pointer[adminState]
}

// adminState is what one configuration says.
type adminState struct {
	token    []byte // "": no token, the listener is open (admin.insecure_open or loopback)
	lifetime time.Duration
	codec    *securecookie.SecureCookie // signs under the secret and the token
}

func newAuth(c Config, now func() time.Time) *auth {
	a := &auth{now: now}
	_, _ = rand.Read(a.secret[:]) // crypto/rand.Read never fails
	a.configure(c)
	return a
}

// configure takes the token and lifetime of c; a cookie signed under
// another token no longer opens anything.
func (a *auth) configure(c Config) {
	mac := hmac.New(sha256.New, a.secret[:])
	mac.Write([]byte(c.token))
	// The cookie's own timestamp is of the wall clock, which tests cannot
	// move; the lifetime is checked against the issue time it carries
	// (allowed), so its own check is off (MaxAge 0).
	codec := securecookie.New(mac.Sum(nil), nil).MaxAge(0).SetSerializer(securecookie.JSONEncoder{})
	a.state.Store(&adminState{token: []byte(c.token), lifetime: c.SessionLifetime, codec: codec})
}

// open reports whether no token is set: every request is let through.
func (a *auth) open() bool { return len(a.state.Load().token) == 0 }

// tokenIs compares a presented token with the admin token in constant time.
func (a *auth) tokenIs(presented string) bool {
	t := a.state.Load().token
	return len(t) > 0 && subtle.ConstantTimeCompare([]byte(presented), t) == 1
}

// allowed reports whether r carries the token, or on a safe method a
// session cookie signed under the token and issued less than its
// lifetime ago.
func (a *auth) allowed(r *http.Request) bool {
	if h := r.Header.Get("Authorization"); h != "" {
		key, ok := wire.Bearer(h)
		return ok && a.tokenIs(key)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	c, err := r.Cookie(adminCookie)
	if err != nil {
		return false
	}
	st := a.state.Load()
	var issued int64
	if len(st.token) == 0 || st.codec.Decode(adminCookie, c.Value, &issued) != nil {
		return false
	}
	// A cookie from ahead of the clock is refused past a minute, the
	// allowance for a clock stepped back, so that it cannot live longer
	// than its lifetime.
	age := a.now().Sub(time.Unix(issued, 0))
	return age > -time.Minute && age < st.lifetime
}

// session is a new cookie value, issued now.
func (a *auth) session() (string, time.Duration, error) {
	st := a.state.Load()
	v, err := st.codec.Encode(adminCookie, a.now().Unix())
	return v, st.lifetime, err
}

// require refuses, with 401, a request to next without the token; a
// browser asking for a page is sent to the login form instead.
func (a *auth) require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.open() || a.allowed(r) {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodGet && r.Header.Get("Authorization") == "" && strings.Contains(r.Header.Get("Accept"), "text/html") {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		w.Header()["WWW-Authenticate"] = []string{`Bearer realm="tradergate-admin"`}
		WriteJSON(w, http.StatusUnauthorized, `{"status":"unauthorized"}`)
	})
}

// showLogin is GET /login.
func (a *auth) showLogin(w http.ResponseWriter, r *http.Request) {
	if a.open() {
		http.NotFound(w, r) // nothing to log in to
		return
	}
	writeLoginForm(w, http.StatusOK, "")
}

// login is POST /login: the form's token, checked; a session cookie and
// the status page when it is right, the form again when not.
func (a *auth) login(w http.ResponseWriter, r *http.Request) {
	if a.open() {
		http.NotFound(w, r)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		writeLoginForm(w, http.StatusBadRequest, "The form could not be read.")
		return
	}
	if !a.tokenIs(r.PostForm.Get("token")) {
		writeLoginForm(w, http.StatusUnauthorized, "That is not the admin token.")
		return
	}
	value, lifetime, err := a.session()
	if err != nil { // only a value that does not serialize: never an int64
		http.Error(w, "the session could not be made", http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     adminCookie,
		Value:    value,
		Path:     "/",
		MaxAge:   int(lifetime / time.Second),
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
