//go:build unix

package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"tradergate/internal/testkit"
)

// TestSIGHUPReloadsCertificates is TLS mode files through the binary's
// own wiring: a swap of the files plus SIGHUP serves the new certificate.
func TestSIGHUPReloadsCertificates(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key")
	first := writeSelfSigned(t, certFile, keyFile, "first")
	config := filepath.Join(dir, "config.yaml")
	yaml := "server:\n  tls:\n    mode: files\n    cert_file: " + strconv.Quote(certFile) + "\n    key_file: " + strconv.Quote(keyFile) +
		"\n    http_listen: \"\"\nupstream:\n  base_url: http://127.0.0.1:1/open-api\nplans:\n  pro: {requests: 10, window: 1m}\n"
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}

	var logs testkit.LogBuffer
	m := &Main{ConfigPath: config, Demo: true, Listen: "127.0.0.1:0", AdminListen: "off", Stdout: io.Discard, Logger: slogTo(&logs),
		Getenv: func(string) string { return "" }}
	addr, _ := startMain(t, m, &logs)

	served := func() *x509.Certificate {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0]
	}
	if got := served(); !got.Equal(first) {
		t.Fatalf("serving %q, want the first certificate", got.Subject.CommonName)
	}
	second := writeSelfSigned(t, certFile, keyFile, "second")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// The reload runs on the signal's goroutine.
	testkit.Eventually(t, "the second certificate served after SIGHUP", func() bool { return served().Equal(second) })
}

// writeSelfSigned writes a new self-signed pair over certFile and keyFile.
func writeSelfSigned(t *testing.T, certFile, keyFile, cn string) *x509.Certificate {
	t.Helper()
	p := testkit.SelfSigned(t, cn, time.Now().Add(time.Hour), "localhost")
	p.Write(t, certFile, keyFile)
	return p.Leaf
}
