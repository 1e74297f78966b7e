package tlsedge

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"tradergate/normalize"
)

// The redirect's Location for hosts and ports the end-to-end test cannot
// dial (proxy/tls_edge_test.go covers the listener itself).
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
		{"a host the edge does not serve", "443", "/v1/x", "elsewhere.example", 421, ""},
		{"an address the edge does not serve", "443", "/", "10.1.2.3", 421, ""},
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
			serves := func(h string) bool { return h == "api.example.com" || h == "2001:db8::1" }
			redirectToHTTPS(tc.port, serves).ServeHTTP(w, r)
			if w.Code != tc.status || w.Header().Get("Location") != tc.want {
				t.Errorf("got %d %q, want %d %q", w.Code, w.Header().Get("Location"), tc.status, tc.want)
			}
			if tc.status != 308 && (w.Header().Get("Content-Type") != "application/json" || !strings.Contains(w.Body.String(), `"status_code":"0"`)) {
				t.Errorf("not a JSON failure: %q %s", w.Header().Get("Content-Type"), w.Body)
			}
		})
	}
}

func TestDirectoryShorthands(t *testing.T) {
	for ca, want := range map[string]string{
		CAProduction:                       letsEncryptProduction,
		CAStaging:                          letsEncryptStaging,
		"https://ca.internal/acme/dir":     "https://ca.internal/acme/dir",
		"http://ca.internal/acme/dir":      "",
		"https://user:pw@ca.internal/acme": "",
	} {
		got, err := (&Config{CA: ca}).directory()
		if got != want || (want == "") != (err != nil) {
			t.Errorf("directory(%q) = %q, %v; want %q", ca, got, err, want)
		}
	}
}

// TestFailureBodyIsTheEdgeEnvelope: the listener's failures carry the
// same envelope, byte for byte, as every other failure of the edge.
func TestFailureBodyIsTheEdgeEnvelope(t *testing.T) {
	for _, msg := range []string{msgNoHost, msgMisdirected} {
		if got, want := string(failureBody(msg)), string(normalize.AppendError(nil, msg)); got != want {
			t.Errorf("failureBody(%q) = %s, want %s", msg, got, want)
		}
	}
}
