package redistest

import (
	"net"
	"runtime"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	pid, err := serverPID(s.Addr())
	if err != nil || pid != s.cmd.Process.Pid {
		t.Fatalf("serverPID = %d, %v; want our process %d", pid, err, s.cmd.Process.Pid)
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
	if _, err := serverPID(s.Addr()); err != nil {
		t.Fatalf("not answering after Restart: %v", err)
	}
	s.Restart() // restarting a running server replaces it
	if pid2, err := serverPID(s.Addr()); err != nil || pid2 == pid {
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
	}
}
