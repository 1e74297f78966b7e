package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
)

// TLS modes.
const TLSOff = "off"

// TLSConfig is server.tls. (Placeholder being replaced by the TLS work.)
type TLSConfig struct {
	Mode string `yaml:"mode"`
}

func (c *TLSConfig) applyDefaults() {
	if c.Mode == "" {
		c.Mode = "off"
	}
}

func (c *TLSConfig) validate() []string {
	if c.Mode != TLSOff {
		return []string{`server.tls.mode: only "off" is supported so far`}
	}
	return nil
}

func (s *Server) serveTLS(ctx context.Context, ln net.Listener, hs *http.Server) error {
	return errors.New("server.tls: not supported so far")
}
