package fleet

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"tradergate/cache/configerr"
)

// Defaults of Config, filled by ApplyDefaults. The section is the one home
// of the Redis defaults: the limiter and the page cache take the timeout
// they are given (Conn.Timeout).
const (
	defaultPrefix  = "tradergate"
	defaultTimeout = 50 * time.Millisecond
)

// Config is the `redis:` section of config.yaml: the one Redis the replicas
// share. Zero values mean what the field comments say; ApplyDefaults fills
// in the defaults.
type Config struct {
	// Addrs are host:port. Empty (zero): nothing is shared, each replica
	// keeps its state to itself. One address: a single Redis. Several: the
	// nodes of a Redis Cluster (the client learns the rest from them). With
	// MasterName set they are the sentinels instead.
	Addrs []string `yaml:"addrs"`
	// MasterName, when set, selects Redis Sentinel: Addrs are the sentinels
	// and this is the name of the master they watch. Zero: no Sentinel. The
	// sentinels themselves are asked without a password.
	MasterName string `yaml:"master_name"`
	// DB is the database number. Zero: 0, the only one a Cluster has.
	DB int `yaml:"db"`
	// Username is the ACL user. Zero: the default user (password only).
	Username string `yaml:"username"`
	// PasswordEnv names the environment variable holding the password, so
	// that the password is in neither the file nor the logs. Zero: no
	// password.
	PasswordEnv string `yaml:"password_env"`
	// TLS connects with TLS (rediss), checking the server against the
	// system's roots or CAFile. Zero: plain TCP.
	TLS bool `yaml:"tls"`
	// CAFile is a PEM file of the CA that signed the servers' certificates,
	// for a private CA; needs TLS. Zero: the system's roots.
	CAFile string `yaml:"ca_file"`
	// Prefix starts every key (Conn.Key), so that deployments can share one
	// Redis. Zero: "tradergate".
	Prefix string `yaml:"prefix"`
	// Timeout bounds one cache or limiter call: dial, wait for a pooled
	// connection, write and read. A slower Redis counts as failing. Zero:
	// 50ms.
	Timeout time.Duration `yaml:"timeout"`
}

// ApplyDefaults fills the zero fields that have a default.
func (c *Config) ApplyDefaults() {
	if c.Prefix == "" {
		c.Prefix = defaultPrefix
	}
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
}

// Enabled reports whether a Redis is configured. When it is not, the
// replicas share nothing and Open must not be called.
func (c *Config) Enabled() bool { return len(c.Addrs) > 0 }

// cluster reports whether Addrs name a Redis Cluster.
func (c *Config) cluster() bool { return c.MasterName == "" && len(c.Addrs) > 1 }

// Validate returns one line per problem, each starting with its field path
// (e.g. "redis.addrs[1]: ..."); none when the section is usable. getenv
// looks up PasswordEnv. It works before or after ApplyDefaults. No line
// ever holds the password.
func (c *Config) Validate(getenv func(string) string) error {
	var errs configerr.List
	add := func(field, format string, args ...any) { errs.Add("redis."+field, format, args...) }
	seen := map[string]bool{}
	for i, a := range c.Addrs {
		f := fmt.Sprintf("addrs[%d]", i)
		if strings.Contains(a, "://") || strings.Contains(a, "@") {
			// Not echoed: a URL may carry a password.
			add(f, "must be host:port, not a URL (the password goes in the variable named by redis.password_env)")
			continue
		}
		if err := checkHostPort(a); err != nil {
			add(f, "must be host:port, got %q: %v", a, err)
			continue
		}
		if seen[a] {
			add(f, "%q is listed twice", a)
		}
		seen[a] = true
	}
	if c.MasterName != "" && !c.Enabled() {
		add("master_name", "needs redis.addrs, the sentinels' addresses")
	}
	switch {
	case c.DB < 0:
		add("db", "must not be negative, got %d", c.DB)
	case c.DB != 0 && c.cluster():
		add("db", "a Redis Cluster has only db 0, got %d (several redis.addrs without master_name mean a Cluster)", c.DB)
	}
	if c.PasswordEnv != "" && c.Enabled() && getenv(c.PasswordEnv) == "" {
		add("password_env", "environment variable %s (the Redis password) is not set", c.PasswordEnv)
	}
	if c.CAFile != "" {
		if !c.TLS {
			errs.AddHint("redis.ca_file", "set tls: true to use it", "set but redis.tls is false")
		} else if _, err := loadCA(c.CAFile); err != nil {
			add("ca_file", "%v", err)
		}
	}
	if strings.ContainsAny(c.Prefix, " \t\r\n") {
		add("prefix", "must not contain white space")
	}
	if strings.ContainsAny(c.Prefix, "{}") {
		// A hash tag in the prefix would put every key in one Cluster slot,
		// so on one node.
		add("prefix", "must not contain { or }")
	}
	if c.Timeout < 0 {
		add("timeout", "must not be negative, got %v", c.Timeout)
	}
	return errs.Err()
}

func checkHostPort(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return err
	}
	if host == "" {
		return fmt.Errorf("host is missing")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port must be 1 to 65535")
	}
	return nil
}

// loadCA reads a PEM bundle into a pool.
func loadCA(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate in %s", path)
	}
	return pool, nil
}
