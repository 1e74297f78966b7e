package tlsedge

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// The plain-HTTP listener of a TLS edge (server.tls.http_listen).
// It answers ACME HTTP-01 challenges (certmagic's handler wraps this one)
// and redirects everything else to https. It never serves the API: nothing
// here reaches the middleware chain, so no page and no key check ever
// travels in the clear from the edge.

// redirectToHTTPS answers with 308 Permanent Redirect to the same host, the
// TLS port, and the path and query exactly as sent.
//
// 308 for every method, not 301: 308 never turns a request into a GET
// (RFC 9110 section 15.4.9), so a client that follows it gets the answer
// it would have got over https directly; and it is permanent, so clients
// that cache redirects go straight to https next time.
//
// It redirects only to a name the edge serves (its certificates' names, or
// the ACME domains): a Host it does not serve is a 421, never a redirect
// there, so that nobody can use the edge to send clients elsewhere.
func redirectToHTTPS(port string, serves func(host string) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, ok := redirectHost(r.Host)
		switch {
		case !ok:
			writeFailure(w, http.StatusBadRequest, msgNoHost)
			return
		case !serves(host):
			writeFailure(w, http.StatusMisdirectedRequest, msgMisdirected)
			return
		}
		if port != "443" {
			host = net.JoinHostPort(host, port)
		} else if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		path := r.URL.EscapedPath()
		if !strings.HasPrefix(path, "/") {
			path = "/" // "OPTIONS *", or an absolute-form URI without a path
		}
		target := "https://" + host + path
		if r.URL.RawQuery != "" || r.URL.ForceQuery {
			target += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, target, http.StatusPermanentRedirect)
	})
}

// The messages of the listener's two failures.
const (
	msgNoHost      = "This address answers over https only, and the request names no usable host"
	msgMisdirected = "Misdirected request: this edge does not serve that host"
)

// writeFailure answers in the edge's JSON failure envelope
// (docs/CONTRACT.md, variant A). The envelope is written here rather than
// by normalize.AppendError, so that this package needs nothing of the
// rewrite for its two fixed messages; a test keeps the two bodies equal.
func writeFailure(w http.ResponseWriter, status int, msg string) {
	body := failureBody(msg)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// redirectHost takes the host, without port, out of a Host header. The
// header is the client's: only a DNS name or an IP address passes, so the
// Location cannot be bent into another URL ("evil/x@", spaces, ...).
func redirectHost(h string) (string, bool) {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	} else {
		h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	}
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if ip := net.ParseIP(h); ip != nil {
		return ip.String(), true
	}
	if !isDNSName(h) {
		return "", false
	}
	return h, true
}

// failureBody is the failure envelope holding msg.
func failureBody(msg string) []byte {
	body, _ := json.Marshal(struct {
		Message    string    `json:"message"`
		StatusCode string    `json:"status_code"`
		Data       *struct{} `json:"data"`
	}{msg, "0", nil}) // a struct of strings always marshals
	return body
}
