package cache

import (
	"errors"
	"strings"
	"testing"
	"time"

	"tradergate/cache/configerr"
)

func TestApplyDefaults(t *testing.T) {
	c := Config{
		Policy: Policy{FreshTTL: 2 * time.Second},
		Routes: map[string]Policy{"tx": {NegativeTTL: 5 * time.Second}, "positions_open": {FreshTTL: -1}},
	}
	c.ApplyDefaults()
	want := Policy{
		FreshTTL: 2 * time.Second, ImmutableTTL: defaultImmutableTTL, NegativeTTL: defaultNegativeTTL,
		SettleWindow: defaultSettleWindow, StaleWhileRevalidate: defaultStaleWhileRevalidate, StaleIfError: defaultStaleIfError,
	}
	if c.Policy != want {
		t.Errorf("policy = %+v, want %+v", c.Policy, want)
	}
	if c.MaxBytes != DefaultMaxBytes || c.CompressMinBytes != defaultCompressMinBytes {
		t.Errorf("max_bytes %d, compress_min_bytes %d", c.MaxBytes, c.CompressMinBytes)
	}
	tx := want
	tx.NegativeTTL = 5 * time.Second
	if got := c.Routes["tx"]; got != tx {
		t.Errorf("routes.tx = %+v, want %+v (inherits policy)", got, tx)
	}
	if got := c.Routes["positions_open"].FreshTTL; got != -1 {
		t.Errorf("routes.positions_open.fresh_ttl = %v, want -1 (off) kept", got)
	}
	again := c
	again.ApplyDefaults()
	if again.Policy != c.Policy {
		t.Error("ApplyDefaults is not idempotent")
	}
}

func TestValidate(t *testing.T) {
	routes := []string{"activity", "tx"}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // substring; "" means valid
	}{
		{"zero is valid", Config{}, ""},
		{"offs are valid", Config{Policy: Policy{FreshTTL: -1, StaleIfError: -1}, CompressMinBytes: -1}, ""},
		{"known route", Config{Routes: map[string]Policy{"tx": {}}}, ""},
		{"unknown route", Config{Routes: map[string]Policy{"foo": {}}}, "cache.routes.foo: unknown route (routes: activity, tx)"},
		{"negative max_bytes", Config{MaxBytes: -1}, "cache.max_bytes: must not be negative"},
		{"max_bytes in MiB by mistake", Config{MaxBytes: 256}, "cache.max_bytes: must be at least 1048576"},
		{"fresh_ttl too long", Config{Policy: Policy{FreshTTL: time.Hour}}, "cache.policy.fresh_ttl: must be at most 1m0s"},
		{"negative_ttl too long", Config{Policy: Policy{NegativeTTL: 2 * time.Minute}}, "cache.policy.negative_ttl: must be at most"},
		{"swr too long", Config{Routes: map[string]Policy{"activity": {StaleWhileRevalidate: time.Hour}}}, "cache.routes.activity.stale_while_revalidate: must be at most"},
		{"negative settle window", Config{Policy: Policy{SettleWindow: -time.Second}}, "cache.policy.settle_window: must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate(routes)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Fatalf("error is not one line: %q", err)
			case err != nil && !errors.As(err, new(configerr.List)):
				t.Fatalf("error %T is not a configerr.List", err)
			}
		})
	}
	// New validates too, without route names.
	if _, err := New(Config{MaxBytes: 10}, Options{}); err == nil {
		t.Error("New accepted max_bytes 10")
	}
}
