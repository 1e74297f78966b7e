package main

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"time"

	"tradergate/internal/testkit/selfsigned"
)

// tlsServerName is the name the TLS rows' clients check the certificate
// against; the certificate also names 127.0.0.1.
const tlsServerName = "localhost"

// certFiles are the PEM files of the TLS rows' certificate.
type certFiles struct {
	cert, key string
}

// makeCert writes a self-signed certificate and its key under dir, valid
// for a month from an hour before now: what tradergate (server.tls mode
// files) and nginx both present.
func makeCert(dir string, now time.Time) (certFiles, error) {
	p, err := selfsigned.New(tlsServerName, now.Add(-time.Hour), now.Add(30*24*time.Hour), tlsServerName)
	if err != nil {
		return certFiles{}, err
	}
	f := certFiles{cert: filepath.Join(dir, "bench-cert.pem"), key: filepath.Join(dir, "bench-key.pem")}
	if err := p.WriteFiles(f.cert, f.key); err != nil {
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
