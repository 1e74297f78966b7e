// Package selfsigned makes the self-signed certificates that tests and the
// benchmark harness serve TLS with. It does not import testing, so that a
// program (the bench) can use it as well as the testkit.
package selfsigned

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"time"
)

// Pair is a certificate and its key, PEM-encoded, and the parsed
// certificate.
type Pair struct {
	CertPEM, KeyPEM []byte
	Leaf            *x509.Certificate
}

// New makes an ECDSA P-256 certificate named cn, for 127.0.0.1 and the DNS
// names, valid from notBefore until notAfter. P-256 is what tradergate and
// nginx alike sign handshakes with, so that comparisons of the two do not
// differ by key type. The certificate is its own root (a CA), so a client
// trusts it, and nothing else, with Pool.
func New(cn string, notBefore, notAfter time.Time, dnsNames ...string) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 63))
	if err != nil {
		return Pair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		DNSNames:              dnsNames,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Pair{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return Pair{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Leaf:    leaf,
	}, nil
}

// Pool is a certificate pool holding only this certificate.
func (p Pair) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.Leaf)
	return pool
}

// WriteFiles replaces certFile and keyFile the way deployment tools do: a
// new file renamed over the old one, so that a server reloading them never
// reads half a file. The key is readable by its owner only; the
// certificate, being public, by anyone.
func (p Pair) WriteFiles(certFile, keyFile string) error {
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{certFile, p.CertPEM, 0o644}, {keyFile, p.KeyPEM, 0o600}} {
		tmp := f.path + ".new"
		if err := os.WriteFile(tmp, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Rename(tmp, f.path); err != nil {
			_ = os.Remove(tmp)
			return err
		}
	}
	return nil
}
