package load

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// clientTLS builds the client configuration of a TLS spec: TLS 1.3 only,
// HTTP/1.1 (or HTTP/2, TLSSpec.HTTP2) by ALPN, the server's own certificate as the one root, X25519
// as the one key exchange (TLSSpec), and a session cache when resuming.
func clientTLS(s *TLSSpec) (*tls.Config, error) {
	pem, err := os.ReadFile(s.CAFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", s.CAFile)
	}
	if s.ServerName == "" {
		return nil, errors.New("TLS: no server name")
	}
	c := &tls.Config{
		RootCAs:          roots,
		ServerName:       s.ServerName,
		MinVersion:       tls.VersionTLS13,
		NextProtos:       []string{"http/1.1"},
		CurvePreferences: []tls.CurveID{tls.X25519},
	}
	if s.HTTP2 {
		c.NextProtos = []string{"h2"}
	}
	if s.Resume {
		c.ClientSessionCache = tls.NewLRUClientSessionCache(64)
	}
	return c, nil
}
