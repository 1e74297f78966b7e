package proxy_test

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tradergate/internal/testkit"
	"tradergate/proxy"
)

// shippedConfig is config.yaml as shipped, with one key: the shipped file
// has none, and a file without keys does not start.
func shippedConfig(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Replace(string(data), "keys: []\n", "keys:\n  - id: alice\n    sha256: \""+proxy.HashKey("k")+"\"\n    plan: free\n    routes: [\"*\"]\n", 1)
}

func getenvOf(vals map[string]string) func(string) string {
	return func(k string) string { return vals[k] }
}

func TestCheckShippedConfig(t *testing.T) {
	r := proxy.Check([]byte(shippedConfig(t)), getenvOf(map[string]string{"TRADERGATE_UPSTREAM_KEY": "up"}))
	if len(r.Problems) > 0 || r.Config == nil {
		t.Fatalf("problems in config.yaml: %v", r.Problems)
	}
	if want := []proxy.EnvVar{{Field: "upstream.key_env", Name: "TRADERGATE_UPSTREAM_KEY", Set: true}}; len(r.Env) != 1 || r.Env[0] != want[0] {
		t.Errorf("env = %+v, want %+v", r.Env, want)
	}
	if out, want := reportHas(t, r, "config.yaml"), "config.yaml: environment variable TRADERGATE_UPSTREAM_KEY (upstream.key_env) is set\nconfig.yaml: OK\n"; out != want {
		t.Errorf("report:\n%s\nwant:\n%s", out, want)
	}
}

// TestCheckNamesFieldAndLine: every problem of a file with several is
// reported apart, on the line of its field, in file order; a field left
// out is placed on its section's line.
func TestCheckNamesFieldAndLine(t *testing.T) {
	const bad = `server:
  listen: "nope"
upstream:
  base_url: "http://127.0.0.1:1/open-api"
keys:
  - id: alice
    sha256: "abc"
    plan: gold
    routes: ["*"]
plans:
  free: {requests: 10, window: 1m}
redis:
  addrs: ["127.0.0.1:6379"]
  ca_file: /etc/ca.pem
log:
  level: loud
`
	r := proxy.Check([]byte(bad), getenvOf(nil))
	want := []proxy.Problem{
		{Line: 2, Field: "server.listen", Message: `must be host:port, got "nope"`},
		{Line: 3, Field: "upstream.key_env", Message: "environment variable TRADERGATE_UPSTREAM_KEY (the edge's legacy API key) is not set"},
		{Line: 7, Field: "keys[0].sha256", Message: "must be 64 hex digits (the SHA-256 of the key, from `tradergate hash-key`)"},
		{Line: 8, Field: "keys[0].plan", Message: `unknown plan "gold" (plans: free)`},
		// A message that holds "; " stays one problem.
		{Line: 14, Field: "redis.ca_file", Message: "set but redis.tls is false; set tls: true to use it"},
		{Line: 16, Field: "log.level", Message: `must be debug, info, warn or error, got "loud"`},
	}
	if len(r.Problems) != len(want) {
		t.Fatalf("problems:\n%s\nwant %d", joinProblems(r.Problems), len(want))
	}
	for i, p := range r.Problems {
		if p != want[i] {
			t.Errorf("problem %d = %+v\nwant %+v", i, p, want[i])
		}
	}
	if r.Config != nil {
		t.Error("a config with problems is returned")
	}
	reportHas(t, r, "edge.yaml",
		"edge.yaml: environment variable TRADERGATE_UPSTREAM_KEY (upstream.key_env) is unset\n",
		"edge.yaml:2: server.listen: must be host:port, got \"nope\"\n",
		"edge.yaml:7: keys[0].sha256: must be 64 hex digits",
		"edge.yaml: 6 problems\n")
}

// reportHas writes r for the file name and fails unless it holds every
// piece of want; it returns the report.
func reportHas(t *testing.T, r proxy.CheckReport, name string, want ...string) string {
	t.Helper()
	var out strings.Builder
	if err := r.Write(&out, name); err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("report lacks %q:\n%s", w, out.String())
		}
	}
	return out.String()
}

func TestCheckDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       proxy.Problem
	}{
		{"unknown field", "server:\n  listen: \":1\"\n  listn: x\n", proxy.Problem{Line: 3, Field: "server.listn", Message: "unknown field"}},
		{"unknown section", "server:\n  listen: \":1\"\nextra: 1\n", proxy.Problem{Line: 3, Field: "extra", Message: "unknown field"}},
		{"type", "server:\n  max_header_bytes: lots\n", proxy.Problem{Line: 2, Field: "server.max_header_bytes",
			Message: "cannot unmarshal !!str `lots` into int"}},
		{"syntax", "server:\n  listen: [\n", proxy.Problem{Line: 2, Message: "did not find expected node content"}},
		{"empty", "", proxy.Problem{Message: "config is empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := proxy.Check([]byte(tc.file), getenvOf(nil))
			if len(r.Problems) != 1 || r.Problems[0] != tc.want {
				t.Errorf("problems = %+v, want %+v", r.Problems, tc.want)
			}
		})
	}
}

// TestCheckLoadsFiles: the files the configuration names are loaded as
// start-up loads them; a missing or expired certificate, or CA roots
// that are not PEM, are problems on their field's line.
func TestCheckLoadsFiles(t *testing.T) {
	dir := t.TempDir()
	crt, key := filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key")
	testkit.SelfSigned(t, "edge", time.Now().Add(24*time.Hour), "edge.example").Write(t, crt, key)
	old, oldKey := filepath.Join(dir, "old.crt"), filepath.Join(dir, "old.key")
	testkit.SelfSigned(t, "old", time.Now().Add(-time.Hour), "edge.example").Write(t, old, oldKey)
	notPEM := filepath.Join(dir, "roots.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tickets := filepath.Join(dir, "tickets")
	if err := os.WriteFile(tickets, []byte(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withTLS := func(tls string) string {
		return strings.Replace(shippedConfig(t), "    mode: off\n", tls, 1)
	}
	line := func(cfg, field string) int {
		for i, l := range strings.Split(cfg, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), field+":") {
				return i + 1
			}
		}
		t.Fatalf("no %s in the file", field)
		return 0
	}
	env := getenvOf(map[string]string{"TRADERGATE_UPSTREAM_KEY": "up"})
	for _, tc := range []struct {
		name, tls string
		field     string // "" for no problem
		message   string
	}{
		{"files", "    mode: files\n    cert_file: " + crt + "\n    key_file: " + key + "\n", "", ""},
		{"missing cert", "    mode: files\n    cert_file: " + crt + ".gone\n    key_file: " + key + "\n",
			"server.tls.cert_file", "no such file"},
		{"key of another cert", "    mode: files\n    cert_file: " + crt + "\n    key_file: " + oldKey + "\n",
			"server.tls.cert_file", "private key does not match public key"},
		{"expired", "    mode: files\n    cert_file: " + old + "\n    key_file: " + oldKey + "\n",
			"server.tls.cert_file", "expired at"},
		{"acme roots", "    mode: acme\n    domains: [edge.example]\n    email: ops@example.com\n    ca_roots_file: " + crt + "\n", "", ""},
		{"acme ticket keys", "    mode: acme\n    domains: [edge.example]\n    email: ops@example.com\n    session_ticket_key_file: " + tickets + "\n", "", ""},
		{"acme ticket keys refused", "    mode: acme\n    domains: [edge.example]\n    email: ops@example.com\n    session_ticket_key_file: " + notPEM + "\n",
			"server.tls.session_ticket_key_file", "line 1"},
		{"acme roots not PEM", "    mode: acme\n    domains: [edge.example]\n    email: ops@example.com\n    ca_roots_file: " + notPEM + "\n",
			"server.tls.ca_roots_file", "no PEM certificate in it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := withTLS(tc.tls)
			r := proxy.Check([]byte(cfg), env)
			if tc.field == "" {
				if len(r.Problems) > 0 {
					t.Fatalf("problems: %v", r.Problems)
				}
				return
			}
			if len(r.Problems) != 1 {
				t.Fatalf("problems:\n%s", joinProblems(r.Problems))
			}
			p := r.Problems[0]
			if p.Field != tc.field || p.Line != line(cfg, tc.field[strings.LastIndexByte(tc.field, '.')+1:]) || !strings.Contains(p.Message, tc.message) {
				t.Errorf("problem = %+v, want %s on its line, saying %q", p, tc.field, tc.message)
			}
		})
	}
}

// TestCheckNeverPrintsEnvValues: the variables a file names are reported
// set or unset, and no line of the report holds a value, even of a
// variable whose value is refused.
func TestCheckNeverPrintsEnvValues(t *testing.T) {
	cfg := strings.NewReplacer(
		`password_env: ""`, `password_env: REDIS_PASSWORD`,
		`addrs: []`, `addrs: ["127.0.0.1:6379"]`,
		`token_env: ""`, `token_env: ADMIN_TOKEN`,
	).Replace(shippedConfig(t))
	secrets := map[string]string{
		"TRADERGATE_UPSTREAM_KEY": "upstream-secret-9f3a",
		"ADMIN_TOKEN":             "short-tok", // too short: a problem
	}
	r := proxy.Check([]byte(cfg), getenvOf(secrets))
	out := reportHas(t, r, "config.yaml",
		"TRADERGATE_UPSTREAM_KEY (upstream.key_env) is set",
		"REDIS_PASSWORD (redis.password_env) is unset",
		"ADMIN_TOKEN (admin.token_env) is set",
		"admin.token_env: environment variable ADMIN_TOKEN must hold a token of at least 16 characters",
		"redis.password_env: environment variable REDIS_PASSWORD (the Redis password) is not set")
	for _, v := range secrets {
		if strings.Contains(out, v) {
			t.Errorf("the report holds the value %q:\n%s", v, out)
		}
	}
}

func joinProblems(ps []proxy.Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.String() + "\n")
	}
	return b.String()
}
