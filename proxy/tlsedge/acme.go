package tlsedge

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"tradergate/cache/configerr"

	"github.com/caddyserver/certmagic"
)

// Mode acme: certificates from an ACME CA through certmagic, with
// HTTP-01 answered on http_listen and TLS-ALPN-01 on server.listen, and
// renewal in the background.
//
// certmagic's package-level defaults (Default, DefaultACME, the default
// cache) are never touched: each edge builds its own Cache, Config and
// ACMEIssuer, and stops the cache when it stops.

const (
	letsEncryptProduction = certmagic.LetsEncryptProductionCA
	letsEncryptStaging    = certmagic.LetsEncryptStagingCA
)

// acmeManager is one edge's certmagic set.
type acmeManager struct {
	magic   *certmagic.Config
	cache   *certmagic.Cache
	issuer  *certmagic.ACMEIssuer
	domains []string
	ca      string // directory URL
	storage string
	log     *slog.Logger
	now     func() time.Time
}

// newACME builds the certmagic set for c. tlsAddr is the TLS listener and
// httpAddr the plain-HTTP one (nil: none, and no HTTP-01).
func (e *Edge) newACME(tlsAddr, httpAddr net.Addr) (*acmeManager, error) {
	c := e.cfg
	ca, err := c.directory()
	if err != nil {
		return nil, fmt.Errorf("server.tls.ca: %w", err)
	}
	roots, err := c.CARoots()
	if err != nil {
		return nil, err
	}
	storage := c.Storage
	if storage == "" {
		if storage, err = defaultStorage(); err != nil {
			return nil, fmt.Errorf("server.tls.storage: %w", err)
		}
	}

	zl := zapToSlog(e.log.Handler())
	m := &acmeManager{domains: c.Domains, ca: ca, storage: storage, log: e.log, now: e.now}
	m.cache = certmagic.NewCache(certmagic.CacheOptions{
		// One Config manages every certificate of this cache.
		GetConfigForCert: func(certmagic.Certificate) (*certmagic.Config, error) { return m.magic, nil },
		Logger:           zl,
	})
	m.magic = certmagic.New(m.cache, certmagic.Config{
		Storage:           &certmagic.FileStorage{Path: storage},
		DefaultServerName: c.Domains[0],
		Logger:            zl,
		// Non-nil and empty: New would otherwise make an issuer from the
		// package-level DefaultACME. Ours is set just below.
		Issuers: []certmagic.Issuer{},
	})

	// The challenge solvers would listen on ListenHost:Alt*Port themselves
	// if the port were free; ours are bound already, so they find the port
	// taken and leave the answering to our listeners (certmagic's
	// robustTryListen).
	tlsHost, tlsPort := hostPort(tlsAddr)
	tmpl := certmagic.ACMEIssuer{
		CA:     ca,
		Email:  c.Email,
		Agreed: true, // choosing mode acme with this CA is agreeing to its terms (docs/CONFIGURATION.md, "Mode `acme`")
		// nil leaves the system roots in place.
		TrustedRoots:   roots,
		ListenHost:     tlsHost,
		AltTLSALPNPort: tlsPort,
		Logger:         zl,
		NotBefore:      -c.Backdate,
	}
	if httpAddr != nil {
		_, tmpl.AltHTTPPort = hostPort(httpAddr)
	} else {
		tmpl.DisableHTTPChallenge = true
	}
	m.issuer = certmagic.NewACMEIssuer(m.magic, tmpl)
	m.magic.Issuers = []certmagic.Issuer{m.issuer}
	return m, nil
}

// obtain makes sure every domain has a certificate: from storage, renewed
// if due, or newly obtained, once and without retries. A domain that ends
// without one fails start-up. A domain whose renewal failed but whose
// cached certificate is still valid is served with that one; certmagic
// retries the renewal in the background.
func (m *acmeManager) obtain(ctx context.Context) error {
	for _, d := range m.domains {
		// One domain at a time: ManageSync stops at the first failure, and
		// a failure of one must not leave the next unmanaged.
		err := m.magic.ManageSync(ctx, []string{d})
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if leaf := m.validCached(d); leaf != nil {
			m.log.Error("tls: renewing the certificate failed; serving the cached one until it expires, renewal is retried in the background",
				"domain", d, "not_after", leaf.NotAfter, "ca", m.ca, "err", err)
			continue
		}
		return fmt.Errorf("tls: cannot obtain a certificate for %s from %s, and %s holds no valid one: %w", d, m.ca, m.storage, err)
	}
	m.log.Info("tls: certificates ready", "domains", m.domains, "ca", m.ca, "storage", m.storage)
	return nil
}

// validCached returns the leaf of a certificate in the cache that covers
// domain and is valid now, or nil.
func (m *acmeManager) validCached(domain string) *x509.Certificate {
	now := m.now()
	for _, c := range m.cache.AllMatchingCertificates(domain) {
		if l := c.Leaf; l != nil && now.After(l.NotBefore) && now.Before(l.NotAfter) {
			return l
		}
	}
	return nil
}

// defaultStorage is certmagic's own default folder, computed here rather
// than read from its package-level Default.
func defaultStorage() (string, error) {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "certmagic"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", errors.New("no home directory for the default folder: set server.tls.storage")
	}
	return filepath.Join(home, ".local", "share", "certmagic"), nil
}

// hostPort splits a listener's address.
func hostPort(a net.Addr) (string, int) {
	host, p, _ := net.SplitHostPort(a.String())
	port, _ := strconv.Atoi(p)
	return host, port
}

// CARoots reads ca_roots_file, the roots mode acme trusts for the CA's
// own HTTPS; nil when none is set (the system roots).
func (c *Config) CARoots() (*x509.CertPool, error) {
	if c.CARootsFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(c.CARootsFile)
	if err != nil {
		return nil, configerr.Wrap("server.tls.ca_roots_file", "", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, &configerr.FieldError{Path: "server.tls.ca_roots_file", Msg: c.CARootsFile + ": no PEM certificate in it"}
	}
	return roots, nil
}
