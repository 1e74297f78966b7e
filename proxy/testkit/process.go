package testkit

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// What tests that run a real program share (redis-server, prometheus,
// chromium): finding it, a free port for it, the end of its log.

// Binary finds the first of names on PATH. Missing, it skips the test,
// or fails it when the environment variable CI is set: CI installs the
// Debian package named, so there a missing program must not pass quietly.
func Binary(tb testing.TB, debianPackage string, names ...string) string {
	tb.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		tb.Fatalf("%s not on PATH and CI is set: install it (apt-get install %s)", names[0], debianPackage)
	}
	tb.Skipf("%s not on PATH, skipping (apt-get install %s; with CI set this fails)", names[0], debianPackage)
	return ""
}

// FreePort is a loopback TCP port nobody listens on right now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Tail is the end of a log file, for failure messages.
func Tail(path string) string {
	b, _ := os.ReadFile(path)
	const n = 2000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
