package proxy

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// The redirect's Location for hosts and ports the end-to-end test cannot
// dial (tls_edge_test.go covers the listener itself).
func TestRedirectToHTTPSLocation(t *testing.T) {
	tests := []struct {
		name, port, target, host string
		status                   int
		want                     string
	}{
		{"port 443 is left out", "443", "/v1/x?a=1", "api.example.com", 308, "https://api.example.com/v1/x?a=1"},
		{"other ports are kept", "8443", "/v1/x", "api.example.com:8080", 308, "https://api.example.com:8443/v1/x"},
		{"IPv6 literal", "443", "/", "[2001:db8::1]:80", 308, "https://[2001:db8::1]/"},
		{"IPv6 literal, other port", "8443", "/", "[2001:DB8::1]", 308, "https://[2001:db8::1]:8443/"},
		{"trailing dot", "443", "/", "api.example.com.", 308, "https://api.example.com/"},
		{"absolute-form request", "443", "http://api.example.com/v1/x?y", "api.example.com", 308, "https://api.example.com/v1/x?y"},
		{"OPTIONS *", "443", "*", "api.example.com", 308, "https://api.example.com/"},
		{"no Host", "443", "/", "", 400, ""},
		{"userinfo trick", "443", "/", "evil.example@api.example.com", 400, ""},
		{"path trick", "443", "/", "evil.example/x", 400, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, tc.target, nil)
			r.Host = tc.host
			if tc.name == "OPTIONS *" {
				r.Method = http.MethodOptions
			}
			w := httptest.NewRecorder()
			redirectToHTTPS(tc.port).ServeHTTP(w, r)
			if w.Code != tc.status || w.Header().Get("Location") != tc.want {
				t.Errorf("got %d %q, want %d %q", w.Code, w.Header().Get("Location"), tc.status, tc.want)
			}
		})
	}
}
