package config

import (
	"errors"
	"strings"
	"testing"

	"tradergate/cache/configerr"
	"tradergate/proxy/tlsedge"
)

// withTLS puts a server.tls block (unindented lines) into validConfig.
func withTLS(block string) string {
	b := "  tls:\n    " + strings.ReplaceAll(strings.TrimSpace(block), "\n", "\n    ") + "\n"
	return strings.Replace(validConfig, "server:\n", "server:\n"+b, 1)
}

func TestTLSConfigDefaults(t *testing.T) {
	c, err := Parse([]byte(validConfig))
	if err != nil {
		t.Fatal(err)
	}
	if tc := c.Server.TLS; tc.Mode != tlsedge.ModeOff || tc.CA != tlsedge.CAProduction || tc.HTTPListen == nil || *tc.HTTPListen != ":80" || tc.HSTSMaxAge != 0 {
		t.Errorf("defaults: %+v", tc)
	}
	c, err = Parse([]byte(withTLS(`http_listen: ""`)))
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Server.TLS.HTTPListen; l == nil || *l != "" {
		t.Errorf("http_listen \"\" must stay empty (no listener), got %v", l)
	}
	c, err = Parse([]byte(withTLS("mode: acme\ndomains: [API.Example.com.]\nemail: ops@example.com\nca: staging")))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(env(map[string]string{"TRADERGATE_UPSTREAM_KEY": "k"})); err != nil {
		t.Fatal(err)
	}
	if tc := c.Server.TLS; tc.Domains[0] != "api.example.com" || tc.CA != tlsedge.CAStaging {
		t.Errorf("domains %v, ca %q", tc.Domains, tc.CA)
	}
}

func TestTLSConfigErrorsNameTheField(t *testing.T) {
	okEnv := env(map[string]string{"TRADERGATE_UPSTREAM_KEY": "k"})
	acme := "mode: acme\ndomains: [api.example.com]\nemail: ops@example.com\n"
	tests := []struct {
		name, block string
		want        []string // substrings of the one-line error; none: valid
	}{
		{"off ignores the other fields", "mode: off\ncert_file: \"\"\nca: gopher://x", nil},
		{"unknown mode", "mode: on", []string{`server.tls.mode: must be "off", "files" or "acme", got "on"`}},
		{"files without files", "mode: files", []string{"server.tls.cert_file: is required when mode is files", "server.tls.key_file: is required"}},
		{"files", "mode: files\ncert_file: a.crt\nkey_file: a.key", nil},
		{"acme", acme, nil},
		{"acme without domains or email", "mode: acme", []string{"server.tls.domains: at least one domain", "server.tls.email: a contact address"}},
		{"wildcard", "mode: acme\ndomains: ['*.example.com']\nemail: a@b.c", []string{"server.tls.domains[0]: wildcards need the DNS-01 challenge"}},
		{"not a name", "mode: acme\ndomains: ['https://example.com', 'example.com:443', '10.0.0.1', ok.example]\nemail: a@b.c",
			[]string{"server.tls.domains[0]: must be a DNS name", "server.tls.domains[1]: must be a DNS name", "server.tls.domains[2]: must be a DNS name"}},
		{"duplicate domain", "mode: acme\ndomains: [a.example, A.example]\nemail: a@b.c", []string{`server.tls.domains[1]: duplicate "a.example"`}},
		{"bad email", "mode: acme\ndomains: [a.example]\nemail: ops", []string{`server.tls.email: a contact address (name@example.com) is required when mode is acme, got "ops"`}},
		{"plain http directory", acme + "ca: http://ca.internal/directory", []string{`server.tls.ca: must be "production", "staging" or the https URL`}},
		{"private directory", acme + "ca: https://ca.internal:9000/acme/directory\nca_roots_file: /etc/ca.pem\nstorage: /var/lib/tradergate", nil},
		{"bad http_listen", acme + "http_listen: '80'", []string{`server.tls.http_listen: must be host:port, got "80"; or "" for no plain-HTTP listener`}},
		{"bad https_port", acme + "https_port: 70000", []string{"server.tls.https_port: must be a port number"}},
		{"negative hsts", acme + "hsts_max_age: -1s", []string{"server.tls.hsts_max_age: must be 0 (no header) or at least 1s"}},
		{"sub-second hsts", acme + "hsts_max_age: 10ms", []string{"server.tls.hsts_max_age: must be 0"}},
		{"hsts", acme + "hsts_max_age: 8760h", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(withTLS(tc.block)))
			if err == nil {
				err = c.Validate(okEnv)
			}
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			var l configerr.List
			if !errors.As(err, &l) || len(l) != len(tc.want) {
				t.Errorf("%d problems, want %d: %v", len(l), len(tc.want), err)
			}
		})
	}
	t.Run("unknown field", func(t *testing.T) {
		_, err := Parse([]byte(withTLS("mode: files\ncertfile: a.crt")))
		if err == nil || !strings.Contains(err.Error(), "server.tls.certfile: unknown field") {
			t.Errorf("ParseConfig = %v", err)
		}
	})
}
