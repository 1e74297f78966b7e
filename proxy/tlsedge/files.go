package tlsedge

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"slices"
	"sync/atomic"

	"tradergate/cache/configerr"
)

// Mode files: a certificate and key from disk (and a second pair, with a
// key of the other kind), re-read on SIGHUP without dropping a
// connection. Handshakes read the current pairs through an atomic
// pointer, so a swap affects only handshakes after it; a connection keeps
// the certificate it was opened with.

// certFiles holds the pairs of mode files.
type certFiles struct {
	cur atomic.Pointer[certSet]
}

// certSet is the pairs served, ECDSA first: a client gets the first it
// supports. An ECDSA key makes a smaller certificate and a cheaper
// handshake signature than an RSA key of like strength; the RSA pair is
// there for clients that support nothing else.
type certSet struct {
	pairs []*tls.Certificate
}

// get is tls.Config.GetCertificate.
func (c *certFiles) get(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	set := c.cur.Load()
	if len(set.pairs) > 1 {
		for _, p := range set.pairs {
			if hello.SupportsCertificate(p) == nil {
				return p, nil
			}
		}
	}
	// One pair, or none the client supports: the first, and the
	// handshake fails as crypto/tls would make it fail.
	return set.pairs[0], nil
}

// ReloadCertificates re-reads server.tls.cert_file and key_file (and the
// second pair, when given) in mode files and serves the new pairs to
// every handshake from now on; open connections keep theirs. A pair that
// does not load, or whose certificate has expired, is an error and the
// previous pairs stay. In the other modes there is no pair to re-read
// (certmagic renews acme certificates by itself). In every mode it then
// re-reads server.tls.session_ticket_key_file, if one is given
// (tickets.go). Safe to call at any time, from any goroutine; main calls
// it on SIGHUP.
func (e *Edge) ReloadCertificates() error {
	if err := e.reloadPairs(); err != nil {
		return err
	}
	return e.tickets.reload(e)
}

// reloadPairs is ReloadCertificates' part for mode files.
func (e *Edge) reloadPairs() error {
	c := e.cfg
	if c.Mode != ModeFiles {
		return nil
	}
	files := [][3]string{{"", c.CertFile, c.KeyFile}}
	if c.SecondCertFile != "" {
		files = append(files, [3]string{"second_", c.SecondCertFile, c.SecondKeyFile})
	}
	set := &certSet{}
	var logs [][]any
	for _, f := range files {
		cert, err := loadKeyPair(f[0], f[1], f[2])
		if err != nil {
			return err
		}
		leaf := cert.Leaf
		if now := e.now(); now.After(leaf.NotAfter) {
			return &configerr.FieldError{Path: "server.tls." + f[0] + "cert_file",
				Msg: fmt.Sprintf("%s: the certificate for %v expired at %s", f[1], names(leaf), leaf.NotAfter.UTC().Format("2006-01-02 15:04:05Z"))}
		}
		set.pairs = append(set.pairs, cert)
		logs = append(logs, []any{f[0] + "cert_file", f[1], "names", names(leaf), "key", leaf.PublicKeyAlgorithm.String(),
			"not_after", leaf.NotAfter, "issuer", leaf.Issuer.String()})
	}
	// ECDSA first; otherwise as configured.
	slices.SortStableFunc(set.pairs, func(a, b *tls.Certificate) int {
		return cmp.Compare(keyRank(a), keyRank(b))
	})
	e.files.cur.Store(set)
	for _, attrs := range logs {
		e.log.Info("tls: certificate loaded", attrs...)
	}
	return nil
}

// keyRank orders pairs by their key: ECDSA first.
func keyRank(c *tls.Certificate) int {
	if c.Leaf.PublicKeyAlgorithm == x509.ECDSA {
		return 0
	}
	return 1
}

// loadKeyPair reads a PEM certificate chain and its key; prefix is the
// pair's prefix in the file's field names ("" or "second_").
func loadKeyPair(prefix, certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, configerr.Wrap("server.tls."+prefix+"cert_file", "", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, configerr.Wrap("server.tls."+prefix+"key_file", "", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, configerr.Wrap("server.tls."+prefix+"cert_file", certFile+", "+prefix+"key_file "+keyFile, err)
	}
	if cert.Leaf == nil { // filled by X509KeyPair unless GODEBUG x509keypairleaf=0
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, configerr.Wrap("server.tls."+prefix+"cert_file", certFile, err)
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
