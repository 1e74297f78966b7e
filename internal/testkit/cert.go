package testkit

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
	"testing"
	"time"
)

// KeyPair is a self-signed certificate and its key, PEM-encoded.
type KeyPair struct {
	CertPEM, KeyPEM []byte
	Leaf            *x509.Certificate
}

// SelfSigned makes a certificate named cn for the DNS names, valid from two
// days before notAfter until notAfter. It is its own root, so a client
// trusts it with Pool.
func SelfSigned(t testing.TB, cn string, notAfter time.Time, dnsNames ...string) KeyPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		DNSNames:              dnsNames,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             notAfter.Add(-48 * time.Hour),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return KeyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Leaf:    leaf,
	}
}

// Pool is a certificate pool holding only this certificate.
func (p KeyPair) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.Leaf)
	return pool
}

// Write replaces certFile and keyFile the way deployment tools do: a new
// file renamed over the old one, so a reader never sees half a file.
func (p KeyPair) Write(t testing.TB, certFile, keyFile string) {
	t.Helper()
	for path, data := range map[string][]byte{certFile: p.CertPEM, keyFile: p.KeyPEM} {
		if err := os.WriteFile(path+".new", data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
}
