// Package tlsedge is TLS at the edge: a certificate and key from files
// (re-read on SIGHUP), or certificates from an ACME CA through certmagic,
// and the plain-HTTP listener that answers ACME HTTP-01 challenges and
// redirects everything else to https. The proxy owns the servers; this
// package hands it the tls.Config and the plain-HTTP server.
package tlsedge

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"tradergate/cache/configerr"
)

// This file holds server.tls and the set-up the server runs with TLS on;
// the certificate sources are in files.go and acme.go, the plain-HTTP
// listener in redirect.go.

// Modes of server.tls.mode.
const (
	ModeOff   = "off"   // plain HTTP on server.listen (the demo default)
	ModeFiles = "files" // a certificate and key from disk, re-read on SIGHUP
	ModeACME  = "acme"  // certificates from an ACME CA, through certmagic
)

// Shorthands of server.tls.ca for Let's Encrypt's directories.
const (
	CAProduction = "production"
	CAStaging    = "staging"
)

// Config is server.tls. Fields of a mode other than the one chosen are
// ignored, so a block can be switched off and on without deleting lines.
type Config struct {
	// Mode is "off", "files" or "acme"; zero: "off".
	Mode string `yaml:"mode"`

	// CertFile is the PEM certificate (leaf first, then its chain) of mode
	// files. Required there; re-read with KeyFile on SIGHUP.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key of CertFile. Required in mode files.
	KeyFile string `yaml:"key_file"`
	// SecondCertFile and SecondKeyFile are a second pair of mode files,
	// for the same names with a key of the other kind (an RSA pair beside
	// an ECDSA one): each client gets the first pair it supports, ECDSA
	// before RSA. Zero: one pair. Both or neither; re-read on SIGHUP.
	SecondCertFile string `yaml:"second_cert_file"`
	SecondKeyFile  string `yaml:"second_key_file"`

	// SessionTicketKeyFile is a file of session ticket keys, one a line,
	// each the base64 of 32 bytes: the first encrypts new tickets, every
	// one decrypts. Replicas given the same file resume each other's TLS
	// sessions. Re-read on SIGHUP. Zero: keys made and rotated in memory
	// by crypto/tls, one process's own (tickets.go).
	SessionTicketKeyFile string `yaml:"session_ticket_key_file"`

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

	// Backdate, when set, backdates ACME orders by that much, which yields
	// a certificate already due for renewal. For tests; never read from
	// the file.
	Backdate time.Duration `yaml:"-"`
}

// ApplyDefaults fills the zero fields with the defaults their comments name.
func (c *Config) ApplyDefaults() {
	c.Mode = cmp.Or(c.Mode, ModeOff)
	c.CA = cmp.Or(c.CA, CAProduction)
	if c.HTTPListen == nil {
		def := ":80"
		c.HTTPListen = &def
	}
}

// Validate reports every problem, each naming its field path
// ("server.tls.mode: ..."), joined. It lower-cases the domains.
func (c *Config) Validate() error {
	var errs configerr.List
	add := func(field, format string, args ...any) { errs.Add("server.tls."+field, format, args...) }
	switch c.Mode {
	case ModeOff:
		return nil
	case ModeFiles:
		if c.CertFile == "" {
			add("cert_file", "is required when mode is files")
		}
		if c.KeyFile == "" {
			add("key_file", "is required when mode is files")
		}
		if (c.SecondCertFile == "") != (c.SecondKeyFile == "") {
			add("second_cert_file", "and second_key_file go together: give both or neither")
		}
	case ModeACME:
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
		add("mode", "must be %q, %q or %q, got %q", ModeOff, ModeFiles, ModeACME, c.Mode)
		return errs.Err()
	}
	if l := *c.HTTPListen; l != "" {
		if err := configerr.CheckListen(l); err != nil {
			errs.AddHint("server.tls.http_listen", `or "" for no plain-HTTP listener`, "%v", err)
		}
	}
	if c.HTTPSPort < 0 || c.HTTPSPort > 65535 {
		add("https_port", "must be a port number, got %d", c.HTTPSPort)
	}
	if c.HSTSMaxAge < 0 || (c.HSTSMaxAge > 0 && c.HSTSMaxAge < time.Second) {
		add("hsts_max_age", "must be 0 (no header) or at least 1s, got %v", c.HSTSMaxAge)
	}
	return errs.Err()
}

// directory resolves server.tls.ca to a directory URL. ACME runs over HTTPS
// only (RFC 8555 section 6.1).
func (c *Config) directory() (string, error) {
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

// Options are what an Edge takes from its owner.
type Options struct {
	// Logger receives certificate events; nil discards them.
	Logger *slog.Logger
	// Now is the clock certificates are judged by; nil: time.Now.
	Now func() time.Time
}

// Edge is the TLS side of one server: its certificate source and, once
// started, its plain-HTTP listener.
type Edge struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	files   certFiles                   // mode files: the certificate new handshakes get
	tickets ticketKeys                  // server.tls.session_ticket_key_file
	acme    atomic.Pointer[acmeManager] // mode acme, once started
}

// Certificate is one certificate the edge serves, for metrics and the
// status page.
type Certificate struct {
	// Name is the first name the certificate is for.
	Name     string
	Names    []string
	NotAfter time.Time
}

// Certificates lists the certificates served now: the files' pair, or the
// newest ACME certificate of each domain; none with TLS off or before
// Start.
func (e *Edge) Certificates() []Certificate {
	var leaves []*x509.Certificate
	switch e.cfg.Mode {
	case ModeFiles:
		if set := e.files.cur.Load(); set != nil {
			for _, c := range set.pairs {
				leaves = append(leaves, c.Leaf)
			}
		}
	case ModeACME:
		if m := e.acme.Load(); m != nil {
			for _, d := range m.domains {
				var newest *x509.Certificate
				for _, c := range m.cache.AllMatchingCertificates(d) {
					if c.Leaf != nil && (newest == nil || c.Leaf.NotAfter.After(newest.NotAfter)) {
						newest = c.Leaf
					}
				}
				if newest != nil {
					leaves = append(leaves, newest)
				}
			}
		}
	}
	out := make([]Certificate, 0, len(leaves))
	for _, l := range leaves {
		n := names(l)
		first := ""
		if len(n) > 0 {
			first = n[0]
		}
		out = append(out, Certificate{Name: first, Names: n, NotAfter: l.NotAfter})
	}
	return out
}

// New returns the Edge of cfg (validated, defaults applied). Nothing is
// read or bound until Start, but ReloadCertificates works from now on.
func New(cfg Config, opt Options) *Edge {
	e := &Edge{cfg: cfg, log: opt.Logger, now: opt.Now}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.now == nil {
		e.now = time.Now
	}
	return e
}

// serves reports whether host (lower-case, no port) is a name the edge
// has a certificate for: an ACME domain, or a name of the files'
// certificate.
func (e *Edge) serves(host string) bool {
	if slices.Contains(e.cfg.Domains, host) {
		return true
	}
	for _, c := range e.Certificates() {
		if slices.Contains(c.Names, host) {
			return true
		}
	}
	return false
}

// Started is what the server runs with TLS on.
type Started struct {
	// TLS is the configuration of the client listener: TLS 1.2 and later,
	// h2 and http/1.1 offered by ALPN, ACME's TLS-ALPN-01 answered.
	TLS *tls.Config
	// Redirect serves Plain: ACME HTTP-01 challenges and a redirect to
	// https for everything else. Both nil when http_listen is "".
	Redirect *http.Server
	Plain    net.Listener
	// HSTS is the Strict-Transport-Security value for every TLS answer;
	// "" sends none.
	HSTS string
	// Ready runs once the servers answer: mode acme obtains or loads its
	// certificates then, since the CA's challenges need the listeners.
	Ready func(ctx context.Context) error
	// Close releases the certificate source after the servers stopped.
	Close func()
}

// Start prepares TLS around the client listener ln: it loads the files, or
// sets up ACME, and binds http_listen. timeouts gives the plain-HTTP
// server its limits and base context. A certificate source that cannot be
// set up is an error here, before anything answers: never plain HTTP on
// the TLS port.
func (e *Edge) Start(ln net.Listener, timeouts *http.Server) (*Started, error) {
	c := e.cfg
	st := &Started{Ready: func(context.Context) error { return nil }, Close: func() {}}
	var tlsCfg *tls.Config
	if c.Mode == ModeFiles {
		if err := e.ReloadCertificates(); err != nil {
			return nil, err
		}
		tlsCfg = &tls.Config{GetCertificate: e.files.get}
	}
	keys, err := e.tickets.load(e)
	if err != nil {
		return nil, err
	}

	// Bound before the CA is asked anything, so that a busy port fails at
	// start and HTTP-01 finds it answering.
	var hln net.Listener
	if *c.HTTPListen != "" {
		if hln, err = net.Listen("tcp", *c.HTTPListen); err != nil {
			return nil, fmt.Errorf("server.tls.http_listen: %w", err)
		}
	}
	challenge := func(h http.Handler) http.Handler { return h }
	if c.Mode == ModeACME {
		var httpAddr net.Addr
		if hln != nil {
			httpAddr = hln.Addr()
		}
		m, err := e.newACME(ln.Addr(), httpAddr)
		if err != nil {
			if hln != nil {
				hln.Close()
			}
			return nil, err
		}
		e.acme.Store(m)
		tlsCfg = m.magic.TLSConfig() // answers TLS-ALPN-01 (acme-tls/1) too
		challenge = m.issuer.HTTPChallengeHandler
		st.Ready, st.Close = m.obtain, m.cache.Stop
	}

	// TLS 1.2 and later only; the Go defaults pick the suites. h2 first:
	// clients that offer it are served HTTP/2. http/1.0 last: a client
	// that offers only it is served by the HTTP/1.1 front, as one that
	// offers no ALPN at all, rather than refused at the handshake (RFC
	// 7301 section 3.2 lets a server fail one it shares no protocol with).
	tlsCfg.MinVersion = tls.VersionTLS12
	tlsCfg.NextProtos = append([]string{"h2", "http/1.1"}, tlsCfg.NextProtos...)
	tlsCfg.NextProtos = append(tlsCfg.NextProtos, "http/1.0")
	st.TLS = tlsCfg
	e.tickets.start(tlsCfg, keys)
	if c.HSTSMaxAge > 0 {
		st.HSTS = "max-age=" + strconv.FormatInt(int64(c.HSTSMaxAge/time.Second), 10)
	}

	if hln != nil {
		port := strconv.Itoa(c.HTTPSPort)
		if c.HTTPSPort == 0 {
			_, port, _ = net.SplitHostPort(ln.Addr().String())
		}
		st.Plain = hln
		st.Redirect = &http.Server{
			Handler:           challenge(redirectToHTTPS(port, e.serves)),
			ReadHeaderTimeout: timeouts.ReadHeaderTimeout,
			ReadTimeout:       timeouts.ReadTimeout,
			WriteTimeout:      timeouts.WriteTimeout,
			IdleTimeout:       timeouts.IdleTimeout,
			MaxHeaderBytes:    timeouts.MaxHeaderBytes,
			ErrorLog:          timeouts.ErrorLog,
			BaseContext:       timeouts.BaseContext,
		}
	}
	attrs := []any{"mode", c.Mode, "addr", ln.Addr().String()}
	if hln != nil {
		attrs = append(attrs, "http_addr", hln.Addr().String())
	}
	e.log.Info("tls: serving", attrs...)
	return st, nil
}
