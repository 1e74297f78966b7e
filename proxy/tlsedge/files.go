package tlsedge

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync/atomic"
)

// Mode files: a certificate and key from disk, re-read on SIGHUP
// without dropping a connection. Handshakes read the current pair through
// an atomic pointer, so a swap affects only handshakes after it; a
// connection keeps the certificate it was opened with.

// certFiles holds the pair of mode files.
type certFiles struct {
	cur atomic.Pointer[tls.Certificate]
}

// get is tls.Config.GetCertificate.
func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.cur.Load(), nil }

// ReloadCertificates re-reads server.tls.cert_file and key_file in mode
// files and serves the new pair to every handshake from now on; open
// connections keep theirs. A pair that does not load, or whose certificate
// has expired, is an error and the previous pair stays. In the other modes
// there is nothing to re-read (certmagic renews acme certificates by
// itself) and it returns nil. Safe to call at any time, from any goroutine;
// main calls it on SIGHUP.
func (e *Edge) ReloadCertificates() error {
	c := e.cfg
	if c.Mode != ModeFiles {
		return nil
	}
	cert, err := loadKeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return err
	}
	leaf := cert.Leaf
	if now := e.now(); now.After(leaf.NotAfter) {
		return fmt.Errorf("server.tls.cert_file %s: the certificate for %v expired at %s", c.CertFile, names(leaf), leaf.NotAfter.UTC().Format("2006-01-02 15:04:05Z"))
	}
	e.files.cur.Store(cert)
	e.log.Info("tls: certificate loaded", "cert_file", c.CertFile, "names", names(leaf), "not_after", leaf.NotAfter, "issuer", leaf.Issuer.String())
	return nil
}

// loadKeyPair reads a PEM certificate chain and its key.
func loadKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("server.tls.cert_file: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("server.tls.key_file: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("server.tls.cert_file %s, key_file %s: %w", certFile, keyFile, err)
	}
	if cert.Leaf == nil { // filled by X509KeyPair unless GODEBUG x509keypairleaf=0
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("server.tls.cert_file %s: %w", certFile, err)
		}
	}
	return &cert, nil
}

// names lists what a certificate is for, for logs and errors.
func names(leaf *x509.Certificate) []string {
	n := append([]string(nil), leaf.DNSNames...)
	for _, ip := range leaf.IPAddresses {
		n = append(n, ip.String())
	}
	if len(n) == 0 && leaf.Subject.CommonName != "" {
		n = append(n, leaf.Subject.CommonName)
	}
	return n
}
