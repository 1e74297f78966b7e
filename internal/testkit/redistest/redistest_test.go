package redistest

import (
	"errors"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	pid, err := serverPID(s.Addr(), "")
	if err != nil || pid != s.proc.Pid() {
		t.Fatalf("serverPID = %d, %v; want our process %d", pid, err, s.proc.Pid())
	}
	if s.URL() != "redis://"+s.Addr()+"/0" {
		t.Fatalf("URL %q", s.URL())
	}

	s.Stop()
	if c, err := net.Dial("tcp", s.Addr()); err == nil {
		c.Close()
		t.Fatal("still listening after Stop")
	}
	s.Stop() // idempotent

	s.Restart()
	if _, err := serverPID(s.Addr(), ""); err != nil {
		t.Fatalf("not answering after Restart: %v", err)
	}
	s.Restart() // restarting a running server replaces it
	if pid2, err := serverPID(s.Addr(), ""); err != nil || pid2 == pid {
		t.Fatalf("after Restart: pid %d (was %d), %v", pid2, pid, err)
	}
}

func TestTwoServersAreSeparate(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.Addr() == b.Addr() {
		t.Fatal("two servers share an address")
	}
}

// recordingTB records how Start ended a test instead of ending this one.
type recordingTB struct {
	testing.TB
	skipped, failed bool
}

func (r *recordingTB) Helper()               {}
func (r *recordingTB) Skipf(string, ...any)  { r.skipped = true; runtime.Goexit() }
func (r *recordingTB) Fatalf(string, ...any) { r.failed = true; runtime.Goexit() }
func (r *recordingTB) Cleanup(func())        {}
func (r *recordingTB) TempDir() string       { return r.TB.TempDir() }

func TestMissingBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no redis-server here
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		r := &recordingTB{TB: t}
		done := make(chan struct{})
		go func() { defer close(done); Start(r) }()
		<-done
		if wantFail := ci != ""; r.failed != wantFail || r.skipped == wantFail {
			t.Errorf("CI=%q: skipped %v failed %v", ci, r.skipped, r.failed)
		}
		rc := &recordingTB{TB: t}
		done = make(chan struct{})
		go func() { defer close(done); StartCluster(rc, 3) }()
		<-done
		if wantFail := ci != ""; rc.failed != wantFail || rc.skipped == wantFail {
			t.Errorf("cluster, CI=%q: skipped %v failed %v", ci, rc.skipped, rc.failed)
		}
	}
}

func TestStartWithPassword(t *testing.T) {
	s := StartWith(t, Options{Password: "pw-9c1e"})
	if _, err := command(s.Addr(), "", "PING"); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("PING without AUTH: %v, want NOAUTH", err)
	}
	if got, err := command(s.Addr(), "pw-9c1e", "PING"); err != nil || got != "PONG" {
		t.Fatalf("PING after AUTH = %q, %v", got, err)
	}
	s.Restart() // the password survives a restart
	if _, err := command(s.Addr(), "", "PING"); err == nil {
		t.Fatal("no password after Restart")
	}
}

func TestCluster(t *testing.T) {
	c := StartCluster(t, 3)
	if len(c.Addrs()) != 3 || len(c.Nodes()) != 3 {
		t.Fatalf("%v", c)
	}
	for _, addr := range c.Addrs() {
		info, err := command(addr, "", "CLUSTER", "INFO")
		if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3") ||
			!strings.Contains(info, "cluster_slots_assigned:16384") {
			t.Fatalf("%s: CLUSTER INFO %v:\n%s", addr, err, info)
		}
	}
	c.Stop()
	for _, addr := range c.Addrs() {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			t.Fatalf("%s still listening after Stop", addr)
		}
	}
	c.Stop() // idempotent
}

func TestSentinel(t *testing.T) {
	s := StartSentinel(t)
	info, err := command(s.Addr(), "", "INFO", "sentinel")
	want := "name=" + s.MasterName() + ",status=ok,address=" + s.Master().Addr()
	if err != nil || !strings.Contains(info, want) {
		t.Fatalf("INFO sentinel %v, want %q in:\n%s", err, want, info)
	}
}

func TestStalled(t *testing.T) {
	var (
		addr string
		conn net.Conn
	)
	t.Run("open", func(t *testing.T) {
		addr = Stalled(t)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn = c
		if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		var ne net.Error
		if n, err := c.Read(make([]byte, 16)); !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("read %d bytes, %v; want no answer (a timeout)", n, err)
		}
	})
	if conn == nil {
		return
	}
	defer conn.Close()
	// The subtest's cleanup closed the listener and the connection it held.
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var ne net.Error
	if _, err := conn.Read(make([]byte, 16)); err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("read after cleanup: %v; want the connection closed", err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("still listening after cleanup")
	}
}
