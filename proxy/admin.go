package proxy

import (
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The admin listener (issue 7): metrics and health, on an address of its
// own so that client traffic and its limits never reach them, and they
// never reach clients.

// AdminOff as admin.listen turns the admin listener off.
const AdminOff = "off"

// AdminConfig is the admin section.
type AdminConfig struct {
	// Listen is the address of /metrics, /healthz and /readyz; zero:
	// "127.0.0.1:9090" (loopback: expose it deliberately); "off": none.
	Listen string `yaml:"listen"`
	// Pprof serves Go's profiler under /debug/pprof/ on the admin listener;
	// zero: off. A CPU profile of the live edge is how the bench harness
	// (issue 8) finds what to fix.
	Pprof bool `yaml:"pprof"`
}

func (c *AdminConfig) applyDefaults() { c.Listen = cmp(c.Listen, "127.0.0.1:9090") }

func (c *AdminConfig) validate() []string {
	if c.Listen == AdminOff {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return []string{`admin.listen: must be host:port or "off", got "` + c.Listen + `"`}
	}
	return nil
}

// adminHandler serves the admin endpoints.
func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{
		ErrorLog:          slogPrinter{s},
		EnableOpenMetrics: false,
	}))
	// Alive: the process answers.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeBody(w, r, http.StatusOK, []byte(`{"status":"ok"}`))
	})
	// Ready: listening with a loaded configuration, and not draining, so a
	// load balancer stops sending before the edge stops answering.
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if s.ready.Load() {
			writeBody(w, r, http.StatusOK, []byte(`{"status":"ready"}`))
			return
		}
		writeBody(w, r, http.StatusServiceUnavailable, []byte(`{"status":"not ready"}`))
	})
	if s.cfg.Admin.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// adminServer is the admin listener's server, or nil when it is off.
func (s *Server) adminServer() (*http.Server, net.Listener, error) {
	addr := s.cfg.Admin.Listen
	if addr == AdminOff {
		return nil, nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	s.adminAddr.Store(ln.Addr().String())
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
