package proxy

import (
	"cmp"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"strconv"
	"time"

	"tradergate/cache/configerr"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The admin listener: metrics and health, on an address of its
// own so that client traffic and its limits never reach them, and they
// never reach clients.

// adminOff as admin.listen turns the admin listener off.
const adminOff = "off"

// AdminConfig is the admin section.
type AdminConfig struct {
	// Listen is the address of /metrics, /healthz and /readyz; zero:
	// "127.0.0.1:9090" (loopback: expose it deliberately); "off": none.
	Listen string `yaml:"listen"`
	// Pprof serves Go's profiler under /debug/pprof/ on the admin listener;
	// zero: off. A CPU profile of the live edge is how the bench harness
	// finds what to fix.
	Pprof bool `yaml:"pprof"`
	// TokenEnv names the environment variable holding a bearer token that
	// every admin path but /healthz and /readyz then requires
	// (`Authorization: Bearer <token>`, or the cookie of the login form,
	// adminlogin.go); zero: no token. Required when listen is not
	// loopback, unless InsecureOpen.
	TokenEnv string `yaml:"token_env"`
	// InsecureOpen serves a listener that is not loopback without a
	// token; zero: such a configuration is refused. For a listener that
	// something else guards (a private network, a proxy that checks).
	InsecureOpen bool `yaml:"insecure_open"`
	// SessionLifetime is how long a login of the form lasts, checked by
	// the edge on every request; zero: 12h. Reloaded on SIGHUP, as the
	// token is: a new token ends every login.
	SessionLifetime time.Duration `yaml:"session_lifetime"`

	// token is the resolved value of TokenEnv; never printed.
	token string
}

func (c *AdminConfig) applyDefaults() {
	c.Listen = cmp.Or(c.Listen, "127.0.0.1:9090")
	c.SessionLifetime = cmp.Or(c.SessionLifetime, 12*time.Hour)
}

// validate reports every problem of the admin section, each naming its
// field path, and reads the token from getenv.
func (c *AdminConfig) validate(getenv func(string) string) error {
	if c.Listen == adminOff {
		return nil
	}
	var errs configerr.List
	if err := configerr.CheckListen(c.Listen); err != nil {
		errs.AddHint("admin.listen", `or "off" for no admin listener`, "%v", err)
	}
	if c.TokenEnv != "" {
		if c.token = getenv(c.TokenEnv); len(c.token) < 16 {
			errs.Add("admin.token_env", "environment variable %s must hold a token of at least 16 characters", c.TokenEnv)
		}
	} else if len(errs) == 0 && !c.InsecureOpen && !c.loopback() {
		// Metrics, the status page and the profiler tell an outsider a
		// great deal: reaching them from elsewhere is opted into.
		errs.AddHint("admin.listen", "set admin.token_env, or admin.insecure_open: true to serve it without a token", "%q is reachable beyond this machine", c.Listen)
	}
	if c.SessionLifetime < time.Minute {
		errs.Add("admin.session_lifetime", "must be at least 1m, got %v", c.SessionLifetime)
	}
	return errs.Err()
}

// loopback reports whether the admin listener is reachable from this
// machine only.
func (c *AdminConfig) loopback() bool {
	host, _, _ := net.SplitHostPort(c.Listen)
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// writeJSON sends a small JSON body of the admin listener.
func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// adminHandler serves the admin endpoints: /healthz and /readyz to anyone
// who reaches the listener (load balancers probe them), everything else
// behind admin.token_env's token when one is set.
func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	guarded := http.NewServeMux()
	guarded.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{
		ErrorLog:          slogPrinter{s},
		EnableOpenMetrics: false,
	}))
	guarded.HandleFunc("GET /migration", s.serveMigration) // migration.go
	guarded.Handle("GET /shadow", s.native)                // proxy/native: comparisons, modes, rollbacks
	// Alive: the process answers.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, `{"status":"ok"}`)
	})
	// Ready: listening with a loaded configuration, and not draining, so a
	// load balancer stops sending before the edge stops answering.
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if s.ready.Load() {
			writeJSON(w, http.StatusOK, `{"status":"ready"}`)
			return
		}
		writeJSON(w, http.StatusServiceUnavailable, `{"status":"not ready"}`)
	})
	if s.cfg.Admin.Pprof {
		guarded.HandleFunc("GET /debug/pprof/", pprof.Index)
		guarded.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		guarded.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		guarded.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		guarded.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	page := s.statusHandler()
	guarded.Handle("GET /{$}", page)
	guarded.Handle("GET /status", page)
	guarded.Handle("GET /status.json", page)
	// With no token set (a loopback listener, or admin.insecure_open) the
	// guard lets everything through and /login is a 404; a reload may set
	// one (adminlogin.go).
	mux.HandleFunc("GET /login", s.adminAuth.showLogin)
	mux.HandleFunc("POST /login", s.adminAuth.login)
	mux.Handle("/", s.adminAuth.require(guarded))
	return mux
}

// adminServer is the admin listener's server, or nil when it is off.
func (s *Server) adminServer() (*http.Server, net.Listener, error) {
	addr := s.cfg.Admin.Listen
	if addr == adminOff {
		return nil, nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	s.adminAddr.Store(ln.Addr().String())
	if !s.cfg.Admin.loopback() && s.cfg.Admin.token == "" {
		s.log.Warn("admin listener is reachable beyond this machine without a token (admin.insecure_open)", "addr", ln.Addr().String())
	}
	return &http.Server{
		Handler:           s.adminHandler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}, ln, nil
}

// AdminAddr is the admin listener's address once Serve has opened it, or "".
func (s *Server) AdminAddr() string {
	a, _ := s.adminAddr.Load().(string)
	return a
}

// slogPrinter lets promhttp report its errors through our logger.
type slogPrinter struct{ s *Server }

func (p slogPrinter) Println(v ...any) { p.s.log.Error("metrics", "err", v) }
