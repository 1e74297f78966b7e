package proxy

import (
	"net"
	"net/http"
	"strings"
)

// The plain-HTTP listener of a TLS edge (server.tls.http_listen, issue 6).
// It answers ACME HTTP-01 challenges (certmagic's handler wraps this one)
// and redirects everything else to https. It never serves the API: nothing
// here reaches the middleware chain, so no page and no key check ever
// travels in the clear from the edge.

// redirectToHTTPS answers with 308 Permanent Redirect to the same host, the
// TLS port, and the path and query exactly as sent.
//
// Why 308 for every method, not 301: 308 never turns a request into a GET
// (RFC 9110 section 15.4.9), so a client that follows it gets the same
// answer over https that it would have got there directly (405 for a POST,
// say) rather than a silently different request; and it is permanent, so
// clients that cache redirects go straight to https next time. Every client
// in current use follows 308.
func redirectToHTTPS(port string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, ok := redirectHost(r.Host)
		if !ok {
			http.Error(w, "400 Bad Request: this address answers over https only, and the request names no usable host", http.StatusBadRequest)
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
