package front

import (
	"cmp"
	"time"

	"tradergate/cache/configerr"
	"tradergate/proxy/tlsedge"
)

// Config is the server section: the client listener and its fronts.
type Config struct {
	// Listen is the address of the client listener; zero: ":8080".
	Listen string `yaml:"listen"`
	// ReadHeaderTimeout bounds how long a client may take to send its
	// headers; zero: 5s.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request; zero: 10s. On HTTP/2 it
	// is how long a request may stay unfinished (no END_STREAM) before
	// its stream is reset.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds writing a response, from the end of the request
	// headers; zero: 30s. It must exceed upstream.timeout.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout closes keep-alive connections idle this long; zero: 120s.
	// On HTTP/2 only streams and DATA count, not PING or SETTINGS.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// ShutdownTimeout is how long in-flight requests may drain on SIGTERM;
	// zero: 15s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// DrainDelay is how long, on SIGTERM, the edge keeps accepting requests
	// while /readyz already says "not ready", so a load balancer stops
	// sending first; zero: none.
	DrainDelay time.Duration `yaml:"drain_delay"`
	// MaxHeaderBytes caps request line plus headers; zero: 16384. An
	// HTTP/2 connection's unfinished requests may hold 16 times it of
	// header lists (serve.go).
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// MaxConnections caps the open client connections, HTTP/1.1 and
	// HTTP/2 together; at the cap the listener accepts nothing more until
	// one closes. Zero: a quarter of the Go memory limit at 64 KiB a
	// connection, at least 1024 (1664 with the default memory limit).
	// Fixed at start.
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerAddress caps the open client connections of one
	// remote address; a new connection past it is closed at once. Zero: a
	// quarter of max_connections; -1: none (behind a load balancer, whose
	// few addresses carry every client). Fixed at start.
	MaxConnectionsPerAddress int `yaml:"max_connections_per_address"`
	// MemoryLimit is the Go memory limit of the process, in bytes: the heap
	// size past which the collector works harder rather than let the
	// process grow. Zero: 1.5 x cache.max_bytes + 32 MiB; -1: none. The
	// environment's GOMEMLIMIT wins over it, and a container's memory limit
	// (cgroups) caps it at 90% of that limit. Fixed at start.
	MemoryLimit int64 `yaml:"memory_limit"`
	// TLS is TLS at the edge; zero: off (plain HTTP).
	TLS tlsedge.Config `yaml:"tls"`
}

// ApplyDefaults fills the zeros the field comments name.
func (s *Config) ApplyDefaults() {
	s.Listen = cmp.Or(s.Listen, ":8080")
	s.ReadHeaderTimeout = cmp.Or(s.ReadHeaderTimeout, 5*time.Second)
	s.ReadTimeout = cmp.Or(s.ReadTimeout, 10*time.Second)
	s.WriteTimeout = cmp.Or(s.WriteTimeout, 30*time.Second)
	s.IdleTimeout = cmp.Or(s.IdleTimeout, 120*time.Second)
	s.ShutdownTimeout = cmp.Or(s.ShutdownTimeout, 15*time.Second)
	s.MaxHeaderBytes = cmp.Or(s.MaxHeaderBytes, 16<<10)
	s.TLS.ApplyDefaults()
}

// Validate checks the server section and its TLS. upstreamTimeout is
// upstream.timeout, which server.write_timeout must exceed.
func (s *Config) Validate(upstreamTimeout time.Duration) error {
	var errs configerr.List
	if err := configerr.CheckListen(s.Listen); err != nil {
		errs.Add("server.listen", "%v", err)
	}
	for name, d := range map[string]time.Duration{
		"server.read_header_timeout": s.ReadHeaderTimeout, "server.read_timeout": s.ReadTimeout,
		"server.write_timeout": s.WriteTimeout, "server.idle_timeout": s.IdleTimeout,
		"server.shutdown_timeout": s.ShutdownTimeout, "server.drain_delay": s.DrainDelay,
	} {
		if d < 0 {
			errs.Add(name, "must not be negative, got %v", d)
		}
	}
	if upstreamTimeout > 0 && s.WriteTimeout > 0 && s.WriteTimeout <= upstreamTimeout {
		errs.Add("server.write_timeout", "must exceed upstream.timeout (%v), or slow upstream answers are cut off mid-write", upstreamTimeout)
	}
	if s.MemoryLimit < -1 || (s.MemoryLimit > 0 && s.MemoryLimit < 64<<20) {
		errs.Add("server.memory_limit", "must be -1 (none), 0 (the default) or at least 64 MiB in bytes, got %d", s.MemoryLimit)
	}
	if s.MaxHeaderBytes < 1024 {
		errs.Add("server.max_header_bytes", "must be at least 1024, got %d", s.MaxHeaderBytes)
	}
	if s.MaxConnections < 0 {
		errs.Add("server.max_connections", "must be 0 (sized from the memory limit) or a count of connections, got %d", s.MaxConnections)
	}
	if s.MaxConnectionsPerAddress < -1 {
		errs.Add("server.max_connections_per_address", "must be -1 (none), 0 (a quarter of max_connections) or a count of connections, got %d", s.MaxConnectionsPerAddress)
	}
	if s.MaxConnections > 0 && s.MaxConnectionsPerAddress > s.MaxConnections {
		errs.Add("server.max_connections_per_address", "must not exceed server.max_connections (%d), got %d", s.MaxConnections, s.MaxConnectionsPerAddress)
	}
	errs.Append(s.TLS.Validate())
	return errs.Err()
}
