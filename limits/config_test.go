package limits

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	var c Config
	c.ApplyDefaults()
	want := Config{
		RedisPrefix:  "tradergate:rl",
		StoreTimeout: 100 * time.Millisecond,
		OnStoreError: "allow",
		Anonymous:    Plan{Requests: 30, Window: time.Minute},
	}
	if c.RedisURL != "" || c.RedisPrefix != want.RedisPrefix || c.StoreTimeout != want.StoreTimeout ||
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
		{"redis url", Config{RedisURL: "redis://127.0.0.1:6380/2"}, ""},
		{"rediss url", Config{RedisURL: "rediss://user:pw@redis.internal:6380/0"}, ""},
		{"on_store_error deny", Config{OnStoreError: "deny"}, ""},
		{"on_store_error bad", Config{OnStoreError: "open"}, "limits.on_store_error: must be allow or deny"},
		{"scheme", Config{RedisURL: "http://127.0.0.1:6379"}, `limits.redis_url: scheme must be redis or rediss, got "http"`},
		{"no host", Config{RedisURL: "redis:///0"}, "limits.redis_url: host is missing (expected redis://host:port/db)"},
		{"bad db", Config{RedisURL: "redis://127.0.0.1:6379/x"}, `limits.redis_url: redis: invalid database number: "x"`},
		{"prefix", Config{RedisPrefix: "a b"}, "limits.redis_prefix: must not contain white space"},
		{"timeout", Config{StoreTimeout: -time.Second}, "limits.store_timeout: must be positive, got -1s"},
		{"anonymous", Config{Anonymous: Plan{Requests: 0, Window: time.Minute}}, "limits.anonymous.requests: must be at least 1"},
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

func TestConfigValidateNeverEchoesRedisPassword(t *testing.T) {
	for _, u := range []string{
		"redis://user:s3cret@host:bad-port/0",
		"redis://user:s3cret@host:6379/0/1",
		"redis://user:s3cret@host:6379/0?dial_timeout=nope",
		"redis://user:s3cret@[::1/0",
		"ftp://user:s3cret@host/0",
	} {
		err := Config{RedisURL: u}.Validate()
		if err == nil {
			t.Errorf("%s: accepted", u)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error echoes the password: %v", err)
		}
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
	if got := errString(err); got != "plans.free.requests: must be at least 1" {
		t.Errorf("bad plan: %q", got)
	}
}
