package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// TLS at the edge (issue 6). This file holds server.tls and the set-up that
// Serve runs with TLS on; the certificate sources are in tls_files.go and
// tls_acme.go, the plain-HTTP listener in tls_redirect.go.

// Modes of server.tls.mode.
const (
	TLSOff   = "off"   // plain HTTP on server.listen (the demo default)
	TLSFiles = "files" // a certificate and key from disk, re-read on SIGHUP
	TLSACME  = "acme"  // certificates from an ACME CA, through certmagic
)

// Shorthands of server.tls.ca for Let's Encrypt's directories.
const (
	CAProduction = "production"
	CAStaging    = "staging"
)

// TLSConfig is server.tls. Fields of a mode other than the one chosen are
// ignored, so a block can be switched off and on without deleting lines.
type TLSConfig struct {
	// Mode is "off", "files" or "acme"; zero: "off".
	Mode string `yaml:"mode"`

	// CertFile is the PEM certificate (leaf first, then its chain) of mode
	// files. Required there; re-read with KeyFile on SIGHUP.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key of CertFile. Required in mode files.
	KeyFile string `yaml:"key_file"`

	// Domains are the names mode acme obtains certificates for: DNS names,
	// no wildcards (HTTP-01 and TLS-ALPN-01 cannot prove one). Required
	// there. A client that sends no SNI gets the first one's certificate.
	Domains []string `yaml:"domains"`
	// Email is the ACME account's contact. Required in mode acme: with none,
	// certmagic would prompt for one on stdin.
	Email string `yaml:"email"`
	// CA is the ACME directory: "production" or "staging" (Let's Encrypt),
	// or the https URL of another directory; zero: "production".
	CA string `yaml:"ca"`
	// CARootsFile is a PEM file of the root certificates trusted for the
	// CA's own HTTPS endpoint, for a private CA (step-ca, Pebble); they
	// replace the system roots for that connection only. Zero: the system
	// roots.
	CARootsFile string `yaml:"ca_roots_file"`
	// Storage is the folder where certmagic keeps the ACME account, the
	// certificates and its locks; replicas that share it share certificates
	// and each other's HTTP-01 challenges. Zero: $XDG_DATA_HOME/certmagic,
	// else ~/.local/share/certmagic (certmagic's own default).
	Storage string `yaml:"storage"`

	// HTTPListen is the plain-HTTP listener, with TLS on, that answers ACME
	// HTTP-01 challenges and redirects everything else to https. Left out:
	// ":80"; "": no such listener (mode acme then proves control with
	// TLS-ALPN-01 on server.listen only).
	HTTPListen *string `yaml:"http_listen"`
	// HTTPSPort is the port written into the redirect's Location; zero: the
	// port of server.listen. Set it when a load balancer or a container maps
	// 443 to another port.
	HTTPSPort int `yaml:"https_port"`
	// HSTSMaxAge, when positive, sends Strict-Transport-Security with this
	// max-age (whole seconds) on every TLS response; zero: no header.
	HSTSMaxAge time.Duration `yaml:"hsts_max_age"`

	// notBefore, when set, backdates ACME orders by that much. Tests only
	// (export_tls_test.go): it yields a certificate already due for renewal.
	notBefore time.Duration
}

func (c *TLSConfig) applyDefaults() {
	c.Mode = cmp(c.Mode, TLSOff)
	c.CA = cmp(c.CA, CAProduction)
	if c.HTTPListen == nil {
		def := ":80"
		c.HTTPListen = &def
	}
}

// validate reports each problem as one line naming its field, as Validate
// does for the rest of the file. It lower-cases the domains.
func (c *TLSConfig) validate() []string {
	var errs []string
	add := func(field, format string, args ...any) {
		errs = append(errs, "server.tls."+field+": "+fmt.Sprintf(format, args...))
	}
	switch c.Mode {
	case TLSOff:
		return nil
	case TLSFiles:
		if c.CertFile == "" {
			add("cert_file", "is required when mode is files")
		}
		if c.KeyFile == "" {
			add("key_file", "is required when mode is files")
		}
	case TLSACME:
		if len(c.Domains) == 0 {
			add("domains", "at least one domain is required when mode is acme")
		}
		seen := map[string]bool{}
		for i, d := range c.Domains {
			d = strings.ToLower(strings.TrimSuffix(d, "."))
			c.Domains[i] = d
			switch {
			case strings.HasPrefix(d, "*."):
				add(fmt.Sprintf("domains[%d]", i), "wildcards need the DNS-01 challenge, which tradergate does not do: list each name, got %q", d)
			case !isDNSName(d):
				add(fmt.Sprintf("domains[%d]", i), "must be a DNS name without scheme or port, got %q", d)
			case seen[d]:
				add(fmt.Sprintf("domains[%d]", i), "duplicate %q", d)
			}
			seen[d] = true
		}
		if at := strings.IndexByte(c.Email, '@'); c.Email == "" || at < 1 || at == len(c.Email)-1 || strings.ContainsAny(c.Email, " \t<>") {
			add("email", "a contact address (name@example.com) is required when mode is acme, got %q", c.Email)
		}
		if _, err := c.directory(); err != nil {
			add("ca", "%v", err)
		}
	default:
		add("mode", "must be %q, %q or %q, got %q", TLSOff, TLSFiles, TLSACME, c.Mode)
		return errs
	}
	if l := *c.HTTPListen; l != "" {
		if _, port, err := net.SplitHostPort(l); err != nil || port == "" {
			add("http_listen", "must be host:port or \"\" (no plain-HTTP listener), got %q", l)
		}
	}
	if c.HTTPSPort < 0 || c.HTTPSPort > 65535 {
		add("https_port", "must be a port number, got %d", c.HTTPSPort)
	}
	if c.HSTSMaxAge < 0 || (c.HSTSMaxAge > 0 && c.HSTSMaxAge < time.Second) {
		add("hsts_max_age", "must be 0 (no header) or at least 1s, got %v", c.HSTSMaxAge)
	}
	return errs
}

// directory resolves server.tls.ca to a directory URL. ACME runs over HTTPS
// only (RFC 8555 section 6.1).
func (c *TLSConfig) directory() (string, error) {
	switch c.CA {
	case CAProduction:
		return letsEncryptProduction, nil
	case CAStaging:
		return letsEncryptStaging, nil
	}
	u, err := url.Parse(c.CA)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return "", fmt.Errorf("must be %q, %q or the https URL of an ACME directory, got %q", CAProduction, CAStaging, c.CA)
	}
	return c.CA, nil
}

// isDNSName reports whether s is a host name of letters, digits and hyphens
// in dot-separated labels (RFC 1123), and not an IP address.
func isDNSName(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			b := label[i]
			if !('a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '-') {
				return false
			}
		}
	}
	return net.ParseIP(s) == nil
}

// serving is one http.Server of the edge and how it starts on its listener.
type serving struct {
	hs    *http.Server
	serve func() error
}

// tlsEdge is what Serve runs with TLS on: the TLS server on server.listen,
// the plain-HTTP server on http_listen, and the certificate source behind
// them.
type tlsEdge struct {
	servers []serving
	// ready runs once the servers are up: mode acme obtains or loads its
	// certificates then, since the CA's challenges need the listeners.
	ready func(ctx context.Context) error
	// close releases the certificate source after the servers stopped.
	close func()
}

// startTLS prepares the servers of a TLS edge around hs, which will serve
// ln. A certificate source that cannot be set up is an error here, before
// anything answers (issue 6: never plain HTTP on the TLS port).
func (s *Server) startTLS(ln net.Listener, hs *http.Server) (*tlsEdge, error) {
	c := s.cfg.Server.TLS
	edge := &tlsEdge{ready: func(context.Context) error { return nil }, close: func() {}}
	var tlsCfg *tls.Config
	if c.Mode == TLSFiles {
		if err := s.ReloadCertificates(); err != nil {
			return nil, err
		}
		tlsCfg = &tls.Config{GetCertificate: s.tlsFiles.get}
	}

	// Bound before the CA is asked anything, so that a busy port fails at
	// start (STYLE.md "Shape") and HTTP-01 finds it answering.
	var hln net.Listener
	if *c.HTTPListen != "" {
		var err error
		if hln, err = net.Listen("tcp", *c.HTTPListen); err != nil {
			return nil, fmt.Errorf("server.tls.http_listen: %w", err)
		}
	}
	challenge := func(h http.Handler) http.Handler { return h }
	if c.Mode == TLSACME {
		var httpAddr net.Addr
		if hln != nil {
			httpAddr = hln.Addr()
		}
		m, err := s.newACME(c, ln.Addr(), httpAddr)
		if err != nil {
			if hln != nil {
				hln.Close()
			}
			return nil, err
		}
		tlsCfg = m.magic.TLSConfig() // answers TLS-ALPN-01 (acme-tls/1) too
		challenge = m.issuer.HTTPChallengeHandler
		edge.ready, edge.close = m.obtain, m.cache.Stop
	}

	// TLS 1.2 and later only (issue 6); the Go defaults pick the suites.
	// h2 first: net/http serves HTTP/2 to clients that offer it.
	tlsCfg.MinVersion = tls.VersionTLS12
	tlsCfg.NextProtos = append([]string{"h2", "http/1.1"}, tlsCfg.NextProtos...)
	hs.TLSConfig = tlsCfg
	if c.HSTSMaxAge > 0 {
		hs.Handler = hsts(c.HSTSMaxAge, hs.Handler)
	}
	edge.servers = []serving{{hs, func() error { return hs.ServeTLS(ln, "", "") }}}

	if hln != nil {
		port := strconv.Itoa(c.HTTPSPort)
		if c.HTTPSPort == 0 {
			_, port, _ = net.SplitHostPort(ln.Addr().String())
		}
		rs := &http.Server{
			Handler:           challenge(redirectToHTTPS(port)),
			ReadHeaderTimeout: hs.ReadHeaderTimeout,
			ReadTimeout:       hs.ReadTimeout,
			WriteTimeout:      hs.WriteTimeout,
			IdleTimeout:       hs.IdleTimeout,
			MaxHeaderBytes:    hs.MaxHeaderBytes,
			ErrorLog:          hs.ErrorLog,
			BaseContext:       hs.BaseContext,
		}
		edge.servers = append(edge.servers, serving{rs, func() error { return rs.Serve(hln) }})
	}
	attrs := []any{"mode", c.Mode, "addr", ln.Addr().String()}
	if hln != nil {
		attrs = append(attrs, "http_addr", hln.Addr().String())
	}
	s.log.Info("tls: serving", attrs...)
	return edge, nil
}

// hsts adds Strict-Transport-Security to every answer of the TLS server.
// Only there: browsers ignore it over plain HTTP (RFC 6797 section 7.2),
// and the plain listener only redirects.
func hsts(maxAge time.Duration, next http.Handler) http.Handler {
	v := "max-age=" + strconv.FormatInt(int64(maxAge/time.Second), 10)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", v)
		next.ServeHTTP(w, r)
	})
}
