package testkit

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	start := time.Unix(1700000000, 0)
	c := NewClock(start)
	c.Advance(time.Minute)
	if got := c.Now(); !got.Equal(start.Add(time.Minute)) {
		t.Errorf("after Advance: %v", got)
	}
	c.Set(start)
	if !c.Now().Equal(start) {
		t.Errorf("after Set: %v", c.Now())
	}
}

func TestLogBuffer(t *testing.T) {
	var b LogBuffer
	b.Logger().Info("hello", "n", 1)
	b.Logger().Debug("hello")
	if b.Count(`"msg":"hello"`) != 2 || !strings.Contains(b.String(), `"n":1`) {
		t.Errorf("log: %s", b.String())
	}
}

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, "three polls", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("polled %d times", n)
	}
}

func TestSelfSigned(t *testing.T) {
	notAfter := time.Now().Add(time.Hour).Truncate(time.Second)
	p := SelfSigned(t, "edge", notAfter, "edge.test")
	dir := t.TempDir()
	cf, kf := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	p.Write(t, cf, kf)
	cert, err := tls.LoadX509KeyPair(cf, kf)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Leaf.Subject.CommonName != "edge" || !cert.Leaf.NotAfter.Equal(notAfter) || cert.Leaf.DNSNames[0] != "edge.test" {
		t.Errorf("leaf: %v %v %v", cert.Leaf.Subject, cert.Leaf.NotAfter, cert.Leaf.DNSNames)
	}
	if _, err := p.Leaf.Verify(x509Opts(p)); err != nil {
		t.Errorf("not its own root: %v", err)
	}
	if _, err := os.Stat(cf + ".new"); !os.IsNotExist(err) {
		t.Errorf("temporary file left: %v", err)
	}
}

func x509Opts(p KeyPair) x509.VerifyOptions {
	return x509.VerifyOptions{Roots: p.Pool(), DNSName: "edge.test"}
}
