package limits

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestConfigDefaults(t *testing.T) {
	var c Config
	c.ApplyDefaults()
	want := Config{
		OnStoreError: "allow",
		Anonymous:    Plan{Requests: 30, Window: time.Minute},
	}
	if c.RedisURL != "" || c.RedisPrefix != "" || c.StoreTimeout != 0 ||
		c.OnStoreError != want.OnStoreError || c.Anonymous != want.Anonymous || c.TrustedProxies != nil {
		t.Fatalf("defaults %+v, want %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		c    Config
		want string // "" = valid
	}{
		{"zero", Config{}, ""},
		{"on_store_error deny", Config{OnStoreError: "deny"}, ""},
		{"on_store_error bad", Config{OnStoreError: "open"}, `limits.on_store_error: must be allow or deny, got "open"`},
		{"anonymous", Config{Anonymous: Plan{Requests: 0, Window: time.Minute}}, "limits.anonymous.requests: must be at least 1, got 0"},
		{"anonymous window", Config{Anonymous: Plan{Requests: 3, Window: 1500 * time.Millisecond}}, "limits.anonymous.window: must be whole seconds, got 1.5s"},
		{"trusted ok", Config{TrustedProxies: []string{"10.0.0.0/8", "192.0.2.1", "2001:db8::/32", "::ffff:10.0.0.0/104"}}, ""},
		{"trusted bad", Config{TrustedProxies: []string{"10.0.0.0/8", "10.0.0.0/33"}}, `limits.trusted_proxies[1]: "10.0.0.0/33" is not an IP or CIDR`},
		{"trusted garbage", Config{TrustedProxies: []string{"proxy.local"}}, `limits.trusted_proxies[0]: "proxy.local" is not an IP or CIDR`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errString(tt.c.Validate()); got != tt.want {
				t.Fatalf("Validate() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestConfigMovedSettings: the store settings moved to the redis section; a
// config still holding one is refused with one line saying where it went,
// never echoing a URL (it may hold a password).
func TestConfigMovedSettings(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"redis_url", "redis_url: redis://user:s3cret@redis.internal:6379/0\non_store_error: deny\n",
			"limits.redis_url: moved; set redis.addrs (and redis.password_env) in the redis section"},
		{"redis_url and the rest", "redis_url: rediss://:s3cret@h:1/0\nredis_prefix: x\nstore_timeout: 1s\n",
			"limits.redis_url: moved; set redis.addrs (and redis.password_env) in the redis section\n" +
				`limits.redis_prefix: moved; set redis.prefix in the redis section (the limiter's keys start with it and ":rl")` + "\n" +
				"limits.store_timeout: moved; set redis.timeout in the redis section"},
		{"redis_prefix", "redis_prefix: tradergate:rl\n",
			`limits.redis_prefix: moved; set redis.prefix in the redis section (the limiter's keys start with it and ":rl")`},
		{"store_timeout", "store_timeout: 100ms\n",
			"limits.store_timeout: moved; set redis.timeout in the redis section"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Config
			dec := yaml.NewDecoder(strings.NewReader(tt.yaml))
			dec.KnownFields(true)
			if err := dec.Decode(&c); err != nil {
				t.Fatalf("decode: %v", err)
			}
			c.ApplyDefaults()
			got := errString(c.Validate())
			if got != tt.want {
				t.Fatalf("Validate() = %q, want %q", got, tt.want)
			}
			if strings.Contains(got, "s3cret") {
				t.Fatalf("the refusal echoes the password: %s", got)
			}
			if _, err := New(c, nil, Options{}); errString(err) != tt.want {
				t.Fatalf("New: %v, want %q", err, tt.want)
			}
		})
	}
}

func TestTrustedMappedPrefix(t *testing.T) {
	p, err := parseTrusted("::ffff:10.0.0.0/104")
	if err != nil || p.String() != "10.0.0.0/8" {
		t.Fatalf("parseTrusted = %v, %v", p, err)
	}
}

func TestNewRejectsInvalid(t *testing.T) {
	if _, err := New(Config{OnStoreError: "x"}, nil, Options{}); err == nil {
		t.Error("bad config accepted")
	}
	_, err := New(Config{}, map[string]Plan{"free": {Requests: 0, Window: time.Minute}}, Options{})
	if got := errString(err); got != "plans.free.requests: must be at least 1, got 0" {
		t.Errorf("bad plan: %q", got)
	}
}
