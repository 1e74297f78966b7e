package selfsigned

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestNew(t *testing.T) {
	from := time.Now().Add(-time.Hour).Truncate(time.Second)
	until := from.Add(24 * time.Hour)
	p, err := New("edge", from, until, "edge.test")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cf, kf := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	if err := p.WriteFiles(cf, kf); err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(cf, kf)
	if err != nil {
		t.Fatal(err)
	}
	l := cert.Leaf
	if l.Subject.CommonName != "edge" || !l.NotBefore.Equal(from) || !l.NotAfter.Equal(until) {
		t.Errorf("leaf: %v from %v until %v", l.Subject, l.NotBefore, l.NotAfter)
	}
	if pub, ok := l.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve.Params().Name != "P-256" {
		t.Errorf("public key %T, want ECDSA P-256", l.PublicKey)
	}
	for _, name := range []string{"edge.test", "127.0.0.1"} {
		if _, err := p.Leaf.Verify(x509.VerifyOptions{Roots: p.Pool(), DNSName: name}); err != nil {
			t.Errorf("%s: not its own root: %v", name, err)
		}
	}
	if fi, err := os.Stat(kf); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	if _, err := os.Stat(cf + ".new"); !os.IsNotExist(err) {
		t.Errorf("temporary file left: %v", err)
	}
}
