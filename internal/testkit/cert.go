package testkit

import (
	"testing"
	"time"

	"tradergate/internal/testkit/selfsigned"
)

// KeyPair is a self-signed certificate and its key, PEM-encoded, with the
// parsed certificate (Leaf) and a pool trusting it alone (Pool).
type KeyPair struct {
	selfsigned.Pair
}

// SelfSigned makes a certificate named cn for the DNS names (and
// 127.0.0.1), valid from two days before notAfter until notAfter. It is
// its own root, so a client trusts it with Pool.
func SelfSigned(t testing.TB, cn string, notAfter time.Time, dnsNames ...string) KeyPair {
	t.Helper()
	p, err := selfsigned.New(cn, notAfter.Add(-48*time.Hour), notAfter, dnsNames...)
	if err != nil {
		t.Fatal(err)
	}
	return KeyPair{p}
}

// Write replaces certFile and keyFile the way deployment tools do: a new
// file renamed over the old one, so a reader never sees half a file.
func (p KeyPair) Write(t testing.TB, certFile, keyFile string) {
	t.Helper()
	if err := p.WriteFiles(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
}
