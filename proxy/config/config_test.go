package config

import (
	"strings"
	"testing"
	"time"

	"tradergate/proxy/upstream"
)

const validConfig = `
server:
  listen: "127.0.0.1:0"
upstream:
  base_url: "http://127.0.0.1:1/open-api/"
keys:
  - id: alice
    sha256: "` + "2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824" + `"
    plan: free
    routes: ["*"]
plans:
  free: {requests: 10, window: 1m}
`

func env(vals map[string]string) func(string) string {
	return func(k string) string { return vals[k] }
}

func TestConfigValid(t *testing.T) {
	c, err := Parse([]byte(validConfig))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(env(map[string]string{"TRADERGATE_UPSTREAM_KEY": "k"})); err != nil {
		t.Fatal(err)
	}
	if c.Upstream.Key != "k" || c.Upstream.BaseURL != "http://127.0.0.1:1/open-api" {
		t.Errorf("upstream = %+v", c.Upstream)
	}
	if c.Keys[0].SHA256 != strings.ToLower(c.Keys[0].SHA256) {
		t.Error("sha256 not lower-cased")
	}
	// Defaults fill what the file leaves out.
	if c.Server.ReadHeaderTimeout != 5*time.Second || c.Upstream.PriceScale != upstream.PriceScaleCents || c.Upstream.Timeout != 10*time.Second {
		t.Errorf("defaults not applied: %+v %+v", c.Server, c.Upstream)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	okEnv := env(map[string]string{"TRADERGATE_UPSTREAM_KEY": "k"})
	tests := []struct {
		name   string
		edit   func(string) string
		getenv func(string) string
		want   string // substring of the one-line error
	}{
		{"unknown top-level", func(s string) string { return s + "extra: 1\n" }, okEnv, "extra: unknown field"},
		{"unknown nested", func(s string) string {
			return strings.Replace(s, `listen: "127.0.0.1:0"`, "listen: \"127.0.0.1:0\"\n  listn: x", 1)
		}, okEnv, "line 4:3: server.listn: unknown field"},
		{"unknown in list", func(s string) string {
			return strings.Replace(s, "plan: free", "plan: free\n    plna: x", 1)
		}, okEnv, "keys[0].plna: unknown field"},
		{"unknown in map", func(s string) string {
			return strings.Replace(s, "{requests: 10, window: 1m}", "{requests: 10, window: 1m, burst: 2}", 1)
		}, okEnv, "plans.free.burst: unknown field"},
		{"duration without unit", func(s string) string {
			return strings.Replace(s, `listen: "127.0.0.1:0"`, "listen: \"127.0.0.1:0\"\n  read_timeout: 30", 1)
		}, okEnv, "server.read_timeout: 30 has no unit; add a unit, such as 1m"},
		{"bad int", func(s string) string {
			return strings.Replace(s, "requests: 10", "requests: ten", 1)
		}, okEnv, `plans.free.requests: must be a whole number, got "ten"`},
		{"missing base_url", func(s string) string {
			return strings.Replace(s, `base_url: "http://127.0.0.1:1/open-api/"`, "", 1)
		}, okEnv, "upstream.base_url: is required"},
		{"base_url with credentials", func(s string) string {
			return strings.Replace(s, "http://127.0.0.1", "http://u:p@127.0.0.1", 1)
		}, okEnv, "upstream.base_url: must be an http(s) URL"},
		{"key env unset", func(s string) string { return s }, env(nil), "upstream.key_env: environment variable TRADERGATE_UPSTREAM_KEY"},
		{"bad price scale", func(s string) string {
			return strings.Replace(s, "upstream:\n", "upstream:\n  price_scale: dollars\n", 1)
		}, okEnv, "upstream.price_scale: must be"},
		{"bad compression", func(s string) string {
			return strings.Replace(s, "upstream:\n", "upstream:\n  compression: br\n", 1)
		}, okEnv, `upstream.compression: must be "gzip" or "none", got "br"`},
		{"no keys", func(s string) string {
			return s[:strings.Index(s, "keys:")] + "plans:\n  free: {requests: 1, window: 1s}\n"
		}, okEnv, "keys: at least one key is required"},
		{"bad sha", func(s string) string { return strings.Replace(s, "2CF24DBA", "XYZ", 1) }, okEnv, "keys[0].sha256: must be 64 hex digits"},
		{"unknown plan", func(s string) string { return strings.Replace(s, "plan: free", "plan: gold", 1) }, okEnv, `keys[0].plan: unknown plan "gold"`},
		{"unknown route", func(s string) string { return strings.Replace(s, `["*"]`, `["trades"]`, 1) }, okEnv, `keys[0].routes: unknown route "trades"`},
		{"no routes", func(s string) string { return strings.Replace(s, `routes: ["*"]`, "", 1) }, okEnv, "keys[0].routes: is required"},
		{"plan window", func(s string) string { return strings.Replace(s, "window: 1m", "window: 1500ms", 1) }, okEnv, "plans.free.window: must be whole seconds"},
		{"write timeout below upstream", func(s string) string {
			return strings.Replace(s, `listen: "127.0.0.1:0"`, "listen: \"127.0.0.1:0\"\n  write_timeout: 5s", 1)
		}, okEnv, "server.write_timeout: must exceed upstream.timeout"},
		{"bad listen", func(s string) string { return strings.Replace(s, `"127.0.0.1:0"`, `"nowhere"`, 1) }, okEnv, "server.listen: must be host:port"},
		{"negative connection cap", func(s string) string {
			return strings.Replace(s, `listen: "127.0.0.1:0"`, "listen: \"127.0.0.1:0\"\n  max_connections: -1", 1)
		}, okEnv, "server.max_connections: must be 0"},
		{"per-address cap below -1", func(s string) string {
			return strings.Replace(s, `listen: "127.0.0.1:0"`, "listen: \"127.0.0.1:0\"\n  max_connections_per_address: -2", 1)
		}, okEnv, "server.max_connections_per_address: must be -1"},
		{"per-address cap over the total", func(s string) string {
			return strings.Replace(s, `listen: "127.0.0.1:0"`, "listen: \"127.0.0.1:0\"\n  max_connections: 10\n  max_connections_per_address: 11", 1)
		}, okEnv, "server.max_connections_per_address: must not exceed server.max_connections (10)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.edit(validConfig)))
			if err == nil {
				err = c.Validate(tc.getenv)
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}
