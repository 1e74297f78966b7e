package config_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tradergate/cache/configerr"
	"tradergate/internal/testkit"
	"tradergate/proxy"
	"tradergate/proxy/config"
)

// shippedConfig is config.yaml as shipped, with one key: the shipped file
// has none, and a file without keys does not start.
func shippedConfig(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Replace(string(data), "keys: []\n", "keys:\n  - id: alice\n    sha256: \""+proxy.HashKey("k")+"\"\n    plan: free\n    routes: [\"*\"]\n", 1)
}

func getenvOf(vals map[string]string) func(string) string {
	return func(k string) string { return vals[k] }
}

func TestCheckShippedConfig(t *testing.T) {
	cfg := shippedConfig(t)
	r := config.Check([]byte(cfg), getenvOf(map[string]string{"TRADERGATE_UPSTREAM_KEY": "up"}))
	if len(r.Problems) > 0 || r.Config == nil {
		t.Fatalf("problems in config.yaml: %v", r.Problems)
	}
	line := lineOf(t, cfg, "  key_env:")
	if want := (config.EnvVar{Field: "upstream.key_env", Name: "TRADERGATE_UPSTREAM_KEY", Set: true, Line: line}); len(r.Env) != 1 || r.Env[0] != want {
		t.Errorf("env = %+v, want %+v", r.Env, want)
	}
	want := fmt.Sprintf("config.yaml:%d: note: upstream.key_env: environment variable TRADERGATE_UPSTREAM_KEY is set\nconfig.yaml: OK\n", line)
	if out := reportHas(t, r, "config.yaml"); out != want {
		t.Errorf("report:\n%s\nwant:\n%s", out, want)
	}
}

// lineOf is the line of the first line of file starting with prefix.
func lineOf(t *testing.T, file, prefix string) int {
	t.Helper()
	for i, l := range strings.Split(file, "\n") {
		if strings.HasPrefix(l, prefix) {
			return i + 1
		}
	}
	t.Fatalf("no line starts with %q", prefix)
	return 0
}

// problem is a FieldError without its cause, to compare.
type problem struct {
	Line, Col       int
	Path, Msg, Hint string
}

func problemsOf(l configerr.List) []problem {
	out := make([]problem, len(l))
	for i, e := range l {
		out[i] = problem{e.Line, e.Col, e.Path, e.Msg, e.Hint}
	}
	return out
}

// TestCheckNamesFieldAndLine: every problem of a file with several, in
// all its sections, is reported apart, on the line and column of its
// field, in file order; a field left out is placed on its section's line.
// A variable the file needs and that is unset is a problem, not a note.
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
	r := config.Check([]byte(bad), getenvOf(nil))
	want := []problem{
		{2, 3, "server.listen", `must be host:port, got "nope"`, ""},
		{3, 1, "upstream.key_env", "environment variable TRADERGATE_UPSTREAM_KEY (the edge's legacy API key) is not set", ""},
		{7, 5, "keys[0].sha256", "must be 64 hex digits (the SHA-256 of the key, from `tradergate hash-key`)", ""},
		{8, 5, "keys[0].plan", `unknown plan "gold" (plans: free)`, ""},
		{14, 3, "redis.ca_file", "set but redis.tls is false", "set tls: true to use it"},
		{16, 3, "log.level", `must be debug, info, warn or error, got "loud"`, ""},
	}
	if got := problemsOf(r.Problems); !slices.Equal(got, want) {
		t.Errorf("problems:\n%v\nwant\n%v", got, want)
	}
	if r.Config != nil {
		t.Error("a config with problems is returned")
	}
	if len(r.Env) != 0 {
		t.Errorf("notes %+v: the unset variable is a problem, not a note", r.Env)
	}
	reportHas(t, r, "edge.yaml",
		"edge.yaml:2:3: server.listen: must be host:port, got \"nope\"\n",
		"edge.yaml:7:5: keys[0].sha256: must be 64 hex digits",
		"edge.yaml:14:3: redis.ca_file: set but redis.tls is false; set tls: true to use it\n",
		"edge.yaml: 6 problems\n")
}

// TestCheckRefusesWhatStartRefuses: an address the listener cannot bind
// for its form is refused by check, as by start.
func TestCheckRefusesWhatStartRefuses(t *testing.T) {
	env := getenvOf(map[string]string{"TRADERGATE_UPSTREAM_KEY": "up"})
	for _, tc := range []struct{ from, to, path, msg string }{
		{`listen: ":8080"`, `listen: "127.0.0.1:99999"`, "server.listen", `port 99999 is out of range (0 to 65535), got "127.0.0.1:99999"`},
		{`listen: ":8080"`, `listen: "127.0.0.1:"`, "server.listen", `has no port, got "127.0.0.1:"`},
		{`listen: ":8080"`, `listen: "bad host:80"`, "server.listen", `host "bad host" is neither an IP address nor a host name`},
		{`listen: "127.0.0.1:9090"`, `listen: "127.0.0.1:70000"`, "admin.listen", `port 70000 is out of range (0 to 65535), got "127.0.0.1:70000"`},
	} {
		cfg := strings.Replace(shippedConfig(t), tc.from, tc.to, 1)
		r := config.Check([]byte(cfg), env)
		if len(r.Problems) != 1 || r.Problems[0].Path != tc.path || r.Problems[0].Msg != tc.msg || r.Problems[0].Line != lineOf(t, cfg, "  "+tc.to) {
			t.Errorf("%s: problems %v, want %s: %s on its line", tc.to, r.Problems, tc.path, tc.msg)
		}
	}
}

// reportHas writes r for the file name and fails unless it holds every
// piece of want; it returns the report.
func reportHas(t *testing.T, r config.CheckReport, name string, want ...string) string {
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

// TestCheckDecodeErrors: what does not decode is placed by the YAML
// parser's own node positions, every problem at once.
func TestCheckDecodeErrors(t *testing.T) {
	serverFields := "known here: drain_delay, idle_timeout, listen, max_connections, max_connections_per_address, max_header_bytes, memory_limit, read_header_timeout, read_timeout, shutdown_timeout, tls, write_timeout"
	for _, tc := range []struct {
		name, file string
		want       []problem
	}{
		{"unknown field", "server:\n  listen: \":1\"\n  listn: x\n", []problem{{3, 3, "server.listn", "unknown field", serverFields}}},
		{"unknown section", "server:\n  listen: \":1\"\nextra: 1\n", []problem{{3, 1, "extra", "unknown field", ""}}},
		{"type", "server:\n  max_header_bytes: lots\n", []problem{{2, 21, "server.max_header_bytes", `must be a whole number, got "lots"`, ""}}},
		{"duration without a unit", "server:\n  read_timeout: 10\n", []problem{{2, 17, "server.read_timeout", "10 has no unit", "add a unit, such as 1m"}}},
		{"duration", "upstream:\n  timeout: soon\n", []problem{{2, 12, "upstream.timeout", `must be a duration such as 500ms, 30s or 1m, got "soon"`, ""}}},
		{"several, in flow style too", "plans:\n  free: {requests: x, window: 60}\nlog: {access: maybe}\nkeys: {}\n", []problem{
			{2, 20, "plans.free.requests", `must be a whole number, got "x"`, ""},
			{2, 31, "plans.free.window", "60 has no unit", "add a unit, such as 1m"},
			{3, 15, "log.access", `must be true or false, got "maybe"`, ""},
			{4, 7, "keys", "must be a list, got a mapping", ""},
		}},
		{"empty", "", []problem{{Msg: "config is empty"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := config.Check([]byte(tc.file), getenvOf(nil))
			got := problemsOf(r.Problems)
			if tc.name == "unknown section" && len(got) == 1 {
				got[0].Hint = "" // the list of every section is long
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems = %+v, want %+v", got, tc.want)
			}
		})
	}
	// yaml.v3 gives a syntax error's line only in its text: the error
	// is passed on whole, as the file's.
	r := config.Check([]byte("server:\n  listen: [\n"), getenvOf(nil))
	if len(r.Problems) != 1 || r.Problems[0].Path != "" || !strings.Contains(r.Problems[0].Msg, "line 2: did not find expected node content") {
		t.Errorf("syntax error: %+v", r.Problems)
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
			r := config.Check([]byte(cfg), env)
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
			if p.Path != tc.field || p.Line != line(cfg, tc.field[strings.LastIndexByte(tc.field, '.')+1:]) || !strings.Contains(p.Msg, tc.message) {
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
	r := config.Check([]byte(cfg), getenvOf(secrets))
	out := reportHas(t, r, "config.yaml",
		"note: upstream.key_env: environment variable TRADERGATE_UPSTREAM_KEY is set",
		"note: admin.token_env: environment variable ADMIN_TOKEN is set",
		"admin.token_env: environment variable ADMIN_TOKEN must hold a token of at least 16 characters",
		"redis.password_env: environment variable REDIS_PASSWORD (the Redis password) is not set")
	for _, v := range secrets {
		if strings.Contains(out, v) {
			t.Errorf("the report holds the value %q:\n%s", v, out)
		}
	}
}

func joinProblems(ps configerr.List) string { return ps.Error() }
