package fleet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tradergate/cache/configerr"
)

func TestConfigDefaults(t *testing.T) {
	var c Config
	c.ApplyDefaults()
	if c.Prefix != "tradergate" || c.Timeout != 50*time.Millisecond || c.Enabled() {
		t.Fatalf("defaults %+v", c)
	}
	if errs := c.Validate(env()); errs != nil {
		t.Fatalf("defaults invalid: %v", errs)
	}
	c.Prefix, c.Timeout = "edge-eu", time.Second
	c.ApplyDefaults()
	if c.Prefix != "edge-eu" || c.Timeout != time.Second {
		t.Fatalf("ApplyDefaults overwrote set fields: %+v", c)
	}
}

func TestConfigValidate(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := env("REDIS_PW", "pw-41d0")
	tests := []struct {
		name string
		c    Config
		want []string // nil: valid
	}{
		{"zero", Config{}, nil},
		{"single", Config{Addrs: []string{"127.0.0.1:6379"}, DB: 3, PasswordEnv: "REDIS_PW"}, nil},
		{"cluster", Config{Addrs: []string{"10.0.0.1:7000", "10.0.0.2:7000", "redis-3.internal:7000"}}, nil},
		{"sentinel db", Config{Addrs: []string{"s1:26379", "s2:26379"}, MasterName: "main", DB: 2}, nil},
		{"ipv6", Config{Addrs: []string{"[::1]:6379"}}, nil},
		{"bad addrs", Config{Addrs: []string{"127.0.0.1:6379", "redis.internal", ":6379", "h:0", "127.0.0.1:6379"}}, []string{
			`redis.addrs[1]: must be host:port, got "redis.internal": address redis.internal: missing port in address`,
			`redis.addrs[2]: must be host:port, got ":6379": host is missing`,
			`redis.addrs[3]: must be host:port, got "h:0": port must be 1 to 65535`,
			`redis.addrs[4]: "127.0.0.1:6379" is listed twice`,
		}},
		{"url", Config{Addrs: []string{"redis://:hunter2@h:6379/0"}}, []string{
			"redis.addrs[0]: must be host:port, not a URL (the password goes in the variable named by redis.password_env)",
		}},
		{"master without sentinels", Config{MasterName: "main"}, []string{
			"redis.master_name: needs redis.addrs, the sentinels' addresses",
		}},
		{"cluster db", Config{Addrs: []string{"a:1", "b:1"}, DB: 1}, []string{
			"redis.db: a Redis Cluster has only db 0, got 1 (several redis.addrs without master_name mean a Cluster)",
		}},
		{"negative db", Config{Addrs: []string{"a:1"}, DB: -1}, []string{"redis.db: must not be negative, got -1"}},
		{"password env unset", Config{Addrs: []string{"a:1"}, PasswordEnv: "REDIS_PASSWORD"}, []string{
			"redis.password_env: environment variable REDIS_PASSWORD (the Redis password) is not set",
		}},
		{"password env, redis off", Config{PasswordEnv: "REDIS_PASSWORD"}, nil},
		{"ca without tls", Config{Addrs: []string{"a:1"}, CAFile: notPEM}, []string{
			"redis.ca_file: set but redis.tls is false; set tls: true to use it",
		}},
		{"ca not pem", Config{Addrs: []string{"a:1"}, TLS: true, CAFile: notPEM}, []string{
			"redis.ca_file: no PEM certificate in " + notPEM,
		}},
		{"ca missing", Config{Addrs: []string{"a:1"}, TLS: true, CAFile: filepath.Join(dir, "none.pem")}, []string{
			"redis.ca_file: cannot read: open " + filepath.Join(dir, "none.pem") + ": no such file or directory",
		}},
		{"prefix", Config{Prefix: "a b{x}"}, []string{
			"redis.prefix: must not contain white space", "redis.prefix: must not contain { or }",
		}},
		{"timeout", Config{Timeout: -time.Millisecond}, []string{"redis.timeout: must not be negative, got -1ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problemLines(tt.c.Validate(getenv))
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("Validate() =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			for _, line := range got {
				if strings.Contains(line, "hunter2") || strings.Contains(line, "pw-41d0") {
					t.Errorf("a line holds a password: %s", line)
				}
			}
		})
	}
}

func TestOpenRefuses(t *testing.T) {
	if _, err := Open(Config{}, env(), Options{}); err == nil {
		t.Error("Open without addrs succeeded")
	}
	_, err := Open(Config{Addrs: []string{"a:1", "bad"}, PasswordEnv: "P"}, env(), Options{})
	if err == nil || !strings.Contains(err.Error(), "redis.addrs[1]") || !strings.Contains(err.Error(), "redis.password_env") {
		t.Errorf("Open: %v, want both problems", err)
	}
}

func TestKey(t *testing.T) {
	c := open(t, Config{Addrs: []string{"127.0.0.1:1"}, Prefix: "tg"}, nil, Options{})
	for _, tt := range []struct {
		parts []string
		want  string
	}{{nil, "tg"}, {[]string{"rl"}, "tg:rl"}, {[]string{"page", "v1", "abc"}, "tg:page:v1:abc"}} {
		if got := c.Key(tt.parts...); got != tt.want {
			t.Errorf("Key(%q) = %q, want %q", tt.parts, got, tt.want)
		}
	}
	if c.Timeout() != defaultTimeout {
		t.Errorf("Timeout() = %v", c.Timeout())
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
