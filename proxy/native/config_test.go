package native_test

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"tradergate/cache/configerr"
	"tradergate/proxy/native"
)

// parse decodes a native: section as the configuration file holds it.
func parse(t *testing.T, text string) native.Config {
	t.Helper()
	var c native.Config
	dec := yaml.NewDecoder(strings.NewReader(text))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("decode: %v", err)
	}
	c.ApplyDefaults()
	return c
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestConfigAsOperatorsWriteIt(t *testing.T) {
	c := parse(t, `
base_url: https://native.internal/
key_env: NATIVE_KEY
timeout: 5s
routes:
  activity: {mode: shadow, sample: 1.0}
  tx: {mode: canary, percent: 10}
  positions_open: {mode: native}
rollback: {error_ratio: 0.05, diff_ratio: 0.01, window: 1m, min_requests: 20}
`)
	if errs := c.Validate(env(map[string]string{"NATIVE_KEY": "s3cret"})); errs != nil {
		t.Fatalf("valid section refused: %v", errs)
	}
	if c.BaseURL != "https://native.internal" || c.Key != "s3cret" || !c.Enabled() {
		t.Errorf("base %q, key resolved %v, enabled %v", c.BaseURL, c.Key == "s3cret", c.Enabled())
	}
	if c.Routes["tx"].Percent != 10 || c.Routes["positions_open"].Mode != native.ModeNative {
		t.Errorf("routes %+v", c.Routes)
	}
}

func TestConfigDefaults(t *testing.T) {
	c := parse(t, `{}`)
	if errs := c.Validate(env(nil)); errs != nil {
		t.Fatalf("empty section refused: %v", errs)
	}
	if c.Enabled() || c.Timeout != 5*time.Second || c.Rollback.Window != time.Minute || c.Rollback.MinRequests != 20 ||
		c.Rollback.ErrorRatio != 0.05 || c.Rollback.DiffRatio != 0.01 || c.Shadow.Workers != 4 || c.Shadow.Queue != 256 {
		t.Errorf("defaults %+v", c)
	}
}

func TestConfigValidateNamesEveryField(t *testing.T) {
	keyed := env(map[string]string{"K": "v"})
	tests := []struct {
		name, text string
		getenv     func(string) string
		want       string
	}{
		{"unknown route", "base_url: http://n\nkey_env: K\nroutes: {trades: {mode: shadow}}", keyed, "native.routes.trades: unknown route"},
		{"unknown mode", "base_url: http://n\nkey_env: K\nroutes: {tx: {mode: mirror}}", keyed, `native.routes.tx.mode: must be legacy, shadow, canary or native, got "mirror"`},
		{"built route", "base_url: http://n\nkey_env: K\nroutes: {orderbook_book: {mode: native}}", keyed, "native.routes.orderbook_book.mode: orderbook_book is built by the edge"},
		{"sample above 1", "base_url: http://n\nkey_env: K\nroutes: {tx: {mode: shadow, sample: 1.5}}", keyed, "native.routes.tx.sample: must be between 0 and 1, got 1.5"},
		{"sample negative", "base_url: http://n\nkey_env: K\nroutes: {tx: {mode: shadow, sample: -0.1}}", keyed, "native.routes.tx.sample: must be between 0 and 1"},
		{"percent above 100", "base_url: http://n\nkey_env: K\nroutes: {tx: {mode: canary, percent: 101}}", keyed, "native.routes.tx.percent: must be between 0 and 100, got 101"},
		{"percent without canary", "base_url: http://n\nkey_env: K\nroutes: {tx: {mode: native, percent: 5}}", keyed, "native.routes.tx.percent: applies to mode canary only"},
		{"no base_url", "routes: {tx: {mode: shadow}}", keyed, "native.base_url: is required when a route is not legacy"},
		{"relative base_url", "base_url: native.internal\nkey_env: K", keyed, "native.base_url: must be an absolute http(s) URL"},
		{"ftp base_url", "base_url: ftp://native.internal\nkey_env: K", keyed, "native.base_url: must be an absolute http(s) URL"},
		{"credentials in base_url", "base_url: https://u:p@native.internal\nkey_env: K", keyed, "native.base_url: must be an absolute http(s) URL"},
		{"no key_env", "base_url: http://n", keyed, "native.key_env: is required when base_url is set"},
		{"key not set", "base_url: http://n\nkey_env: NOPE", keyed, "native.key_env: environment variable NOPE"},
		{"negative timeout", "timeout: -1s", keyed, "native.timeout: must be positive, got -1s"},
		{"error ratio above 1", "rollback: {error_ratio: 1.5}", keyed, "native.rollback.error_ratio: must be in (0, 1], got 1.5"},
		{"diff ratio negative", "rollback: {diff_ratio: -0.5}", keyed, "native.rollback.diff_ratio: must be in (0, 1], got -0.5"},
		{"negative window", "rollback: {window: -1m}", keyed, "native.rollback.window: must be positive"},
		{"min requests", "rollback: {min_requests: -3}", keyed, "native.rollback.min_requests: must be at least 1, got -3"},
		{"workers", "shadow: {workers: -1}", keyed, "native.shadow.workers: must be between 1 and 256"},
		{"queue", "shadow: {queue: -1}", keyed, "native.shadow.queue: must be at least 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := parse(t, tc.text)
			errs := problemLines(c.Validate(tc.getenv))
			joined := strings.Join(errs, "\n")
			if !strings.Contains(joined, tc.want) {
				t.Errorf("errors:\n%s\nwant one containing %q", joined, tc.want)
			}
			if len(errs) != 1 {
				t.Errorf("want exactly one problem, got %d:\n%s", len(errs), joined)
			}
		})
	}
}

func TestConfigCredentialNeverInErrors(t *testing.T) {
	c := parse(t, "base_url: http://n\nkey_env: K\ntimeout: -1s\nroutes: {tx: {mode: warp}}")
	for _, e := range problemLines(c.Validate(env(map[string]string{"K": "hunter2-credential"}))) {
		if strings.Contains(e, "hunter2") {
			t.Errorf("credential in %q", e)
		}
	}
}

// problemLines is each problem of a Validate error, one a line.
func problemLines(err error) []string {
	var l configerr.List
	l.Append(err)
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return lines
}
