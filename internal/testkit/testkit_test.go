package testkit

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
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

// Goroutines holds every goroutine's stack, the dump whole even when it
// is larger than the first buffer.
func TestGoroutines(t *testing.T) {
	const n = 2000 // their stacks take far more than 64 KiB
	release := make(chan struct{})
	defer close(release)
	for range n {
		go parkedForTestGoroutines(release)
	}
	Eventually(t, "every goroutine in the dump", func() bool {
		k := 0
		for _, g := range Goroutines() {
			if strings.Contains(g, "testkit.parkedForTestGoroutines(") {
				k++
			}
		}
		return k == n
	})
}

func parkedForTestGoroutines(release <-chan struct{}) { <-release }

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

func TestProcess(t *testing.T) {
	sh := Binary(t, "dash", "sh")
	dir := t.TempDir()
	var p Process
	never := func(context.Context, int) bool { return false }

	// A program that exits while starting: an error with its log.
	err := p.Start(exec.Command(sh, "-c", "echo no config; exit 3"), filepath.Join(dir, "exit.log"), 5*time.Second, never)
	if err == nil || !strings.Contains(err.Error(), "exited at start") || !strings.Contains(err.Error(), "no config") {
		t.Fatalf("exit at start: %v", err)
	}
	// One never ready: killed at the timeout, an error.
	err = p.Start(exec.Command(sh, "-c", "echo waiting; exec sleep 60"), filepath.Join(dir, "slow.log"), 200*time.Millisecond, never)
	if err == nil || !strings.Contains(err.Error(), "not ready within") || p.Pid() != 0 {
		t.Fatalf("never ready: %v, pid %d", err, p.Pid())
	}
	// Ready: running until Stop, whose second call does nothing.
	var asked int
	err = p.Start(exec.Command(sh, "-c", "exec sleep 60"), filepath.Join(dir, "ok.log"), 5*time.Second, func(_ context.Context, pid int) bool {
		asked = pid
		return true
	})
	if err != nil || p.Pid() == 0 || p.Pid() != asked {
		t.Fatalf("start: %v, pid %d, ready asked about %d", err, p.Pid(), asked)
	}
	if err := p.Start(exec.Command(sh, "-c", "exit 0"), filepath.Join(dir, "twice.log"), time.Second, never); err == nil {
		t.Error("a second start while running succeeded")
	}
	p.Stop()
	p.Stop()
	if p.Pid() != 0 {
		t.Errorf("pid %d after Stop", p.Pid())
	}
}

// httpServer serves h through net/http until its context ends.
type httpServer struct{ h http.Handler }

func (s httpServer) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.h}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	return srv.Serve(ln)
}

func TestServe(t *testing.T) {
	addr, stop, wait := Serve(t, httpServer{http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("hi"))
	})})
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hi" {
		t.Errorf("body %q", body)
	}
	stop()
	if err := wait(); !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
	}
	if err := wait(); !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("second wait: %v", err)
	}
	if _, err := client.Get("http://" + addr + "/"); err == nil {
		t.Error("still serving after stop")
	}
}
