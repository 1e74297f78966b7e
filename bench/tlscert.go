package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// tlsServerName is the name the TLS rows' clients check the certificate
// against; the certificate also names 127.0.0.1.
const tlsServerName = "localhost"

// certFiles are the PEM files of the TLS rows' certificate.
type certFiles struct {
	cert, key string
}

// makeCert writes a self-signed ECDSA P-256 certificate and its key under
// dir: what tradergate (server.tls mode files) and nginx both present, so
// that their handshakes sign with the same key type.
func makeCert(dir string, now time.Time) (certFiles, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return certFiles{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 63))
	if err != nil {
		return certFiles{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: tlsServerName},
		DNSNames:              []string{tlsServerName},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return certFiles{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return certFiles{}, err
	}
	f := certFiles{cert: filepath.Join(dir, "bench-cert.pem"), key: filepath.Join(dir, "bench-key.pem")}
	if err := os.WriteFile(f.cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return certFiles{}, err
	}
	if err := os.WriteFile(f.key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return certFiles{}, err
	}
	return f, nil
}

// tlsClientConfig trusts the certificate alone, for the harness's own
// requests (warm-up) to the TLS rows' servers.
func tlsClientConfig(f certFiles) (*tls.Config, error) {
	data, err := os.ReadFile(f.cert)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(data)
	return &tls.Config{RootCAs: pool, ServerName: tlsServerName, MinVersion: tls.VersionTLS13}, nil
}
