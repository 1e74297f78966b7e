// Package admin is the admin listener: /metrics, /healthz and /readyz,
// the status page and status.json (fed here, rendered by proxy/status),
// GET /migration and GET /shadow (handed in), the profiler, the login
// form and its token, the figures an operator reads beside the request
// counters (operate.go: the build, the reloads, the certificates), and
// this replica's posts for the fleet's GET /shadow (shadowfleet.go). It
// owns the admin section of the configuration (Config).
//
// It only reads the edge: it is handed the parts it shows (Parts) and
// must not change them, nor take part in answering a client request (the
// client listener is proxy/front's, the steps are proxy's).
package admin

import (
	"cmp"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"tradergate/cache"
	"tradergate/cache/configerr"
	"tradergate/limits"
	"tradergate/proxy/fleet"
	"tradergate/proxy/native"
	"tradergate/proxy/route"
	"tradergate/proxy/status"
	"tradergate/proxy/tlsedge"
	"tradergate/proxy/upstream"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The admin listener: metrics and health, on an address of its
// own so that client traffic and its limits never reach them, and they
// never reach clients.

// adminOff as admin.listen turns the admin listener off.
const adminOff = "off"

// Config is the admin section.
type Config struct {
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
	// login.go); zero: no token. Required when listen is not
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

// ApplyDefaults fills the zeros the field comments name.
func (c *Config) ApplyDefaults() {
	c.Listen = cmp.Or(c.Listen, "127.0.0.1:9090")
	c.SessionLifetime = cmp.Or(c.SessionLifetime, 12*time.Hour)
}

// Validate reports every problem of the admin section, each naming its
// field path, and reads the token from getenv.
func (c *Config) Validate(getenv func(string) string) error {
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
func (c *Config) loopback() bool {
	host, _, _ := net.SplitHostPort(c.Listen)
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// Token is the admin token read from admin.token_env, "" without one;
// never printed.
func (c *Config) Token() string { return c.token }

// FixedAtStart is c without what a reload applies: the token and the
// login's lifetime (Admin.Reload).
func (c Config) FixedAtStart() Config {
	c.TokenEnv, c.token, c.SessionLifetime = "", "", 0
	return c
}

// WriteJSON sends a small JSON body of the admin listener.
func WriteJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// Parts are what the admin listener reads of the edge: its parts as the
// Server built them, and the bounds its figures are read against.
type Parts struct {
	Registry *prometheus.Registry // GET /metrics
	Log      *slog.Logger
	// Ready: the edge serves and is not draining (/readyz).
	Ready func() bool
	// Migration answers GET /migration (proxy/migration's report).
	Migration http.HandlerFunc
	// Native is the native service: GET /shadow, and its routes on the
	// status page.
	Native *native.Backend
	// Secrets are the values no page may show (the status page redacts
	// them), read when a page is made.
	Secrets func() []string
	// ConfigHash names the configuration file on the status page.
	ConfigHash string

	// What the status page reads: the metrics' counters, the routes,
	// and the parts whose state it shows.
	Counters status.Counters
	Routes   []*route.Route
	Upstream *upstream.Client
	Cache    *cache.Cache
	Limiter  *limits.Limiter
	TLS      *tlsedge.Edge
	Fleet    *fleet.Conn // nil: one node, no fleet board
	// Replica is the id this replica posts under (NewReplica).
	Replica string
	// Shadow posts this replica's comparisons for the fleet's GET
	// /shadow (NewShadowFleet), nil without Redis.
	Shadow *ShadowFleet
	// The bounds: cache.max_bytes, upstream.max_concurrent, and the
	// Redis prefix of the fleet's board.
	CacheMaxBytes int64
	MaxConcurrent int
	RedisPrefix   string
}

// Admin is the admin listener and what it shows.
type Admin struct {
	cfg     Config // as started: admin.listen and pprof are fixed
	p       Parts
	auth    *auth
	addr    atomic.Value // string, once the listener is open
	reloads reloads
	status  statusState
}

// New returns the admin listener of p, by c (validated), not yet open
// (Listen); now is the clock of its logins.
func New(c Config, p Parts, now func() time.Time) *Admin {
	a := &Admin{cfg: c, p: p, auth: newAuth(c, now)}
	a.initStatus()
	a.reloads.started()
	return a
}

// Reload applies the reloadable parts of the admin section: the token and
// the login's lifetime (a new token ends every login).
func (a *Admin) Reload(c Config) { a.auth.configure(c) }

// handler serves the admin endpoints: /healthz and /readyz to anyone
// who reaches the listener (load balancers probe them), everything else
// behind admin.token_env's token when one is set.
func (a *Admin) handler() http.Handler {
	mux := http.NewServeMux()
	guarded := http.NewServeMux()
	guarded.Handle("GET /metrics", promhttp.HandlerFor(a.p.Registry, promhttp.HandlerOpts{
		ErrorLog:          slogPrinter{a.p.Log},
		EnableOpenMetrics: false,
	}))
	guarded.HandleFunc("GET /migration", a.p.Migration) // proxy/migration
	guarded.Handle("GET /shadow", a.p.Native)           // proxy/native: comparisons, modes, rollbacks
	// Alive: the process answers.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, `{"status":"ok"}`)
	})
	// Ready: listening with a loaded configuration, and not draining, so a
	// load balancer stops sending before the edge stops answering.
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if a.p.Ready() {
			WriteJSON(w, http.StatusOK, `{"status":"ready"}`)
			return
		}
		WriteJSON(w, http.StatusServiceUnavailable, `{"status":"not ready"}`)
	})
	if a.cfg.Pprof {
		guarded.HandleFunc("GET /debug/pprof/", pprof.Index)
		guarded.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		guarded.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		guarded.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		guarded.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	page := a.statusHandler()
	guarded.Handle("GET /{$}", page)
	guarded.Handle("GET /status", page)
	guarded.Handle("GET /status.json", page)
	// With no token set (a loopback listener, or admin.insecure_open) the
	// guard lets everything through and /login is a 404; a reload may set
	// one (login.go).
	mux.HandleFunc("GET /login", a.auth.showLogin)
	mux.HandleFunc("POST /login", a.auth.login)
	mux.Handle("/", a.auth.require(guarded))
	return mux
}

// Listen opens the admin listener and returns its server, to serve on
// it; nil when admin.listen is off.
func (a *Admin) Listen() (*http.Server, net.Listener, error) {
	addr := a.cfg.Listen
	if addr == adminOff {
		return nil, nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	a.addr.Store(ln.Addr().String())
	if !a.cfg.loopback() && a.cfg.token == "" {
		a.p.Log.Warn("admin listener is reachable beyond this machine without a token (admin.insecure_open)", "addr", ln.Addr().String())
	}
	return &http.Server{
		Handler:           a.handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}, ln, nil
}

// Addr is the admin listener's address once Listen has opened it, or "".
func (a *Admin) Addr() string {
	v, _ := a.addr.Load().(string)
	return v
}

// slogPrinter lets promhttp report its errors through our logger.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Error("metrics", "err", v) }
