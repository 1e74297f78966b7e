package testkit

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// What tests that run a real program share (redis-server, prometheus,
// chromium, pebble): finding it, a free port for it, running it until it
// is ready, killing it, the end of its log.

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

// Process is a server program a test runs: started with its output in a
// log file, ready once the caller's check says so, killed by Stop. Its
// methods may be called from any goroutine.
type Process struct {
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// pollEvery is how often Start asks whether a starting program is ready.
const pollEvery = 10 * time.Millisecond

// Start runs cmd, its output written to logPath, and waits until ready
// reports true, asking every 10 ms. ready gets the child's pid and a
// context that ends at the timeout; it should prove that what answers is
// this process (its pid, a path only it was given), since another program
// may have taken the port. The process exiting first, or not ready within
// timeout (it is killed then), is an error carrying the end of its log. A
// Process runs one program at a time: Stop the last one first.
func (p *Process) Start(cmd *exec.Cmd, logPath string, timeout time.Duration, ready func(ctx context.Context, pid int) bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("%s: already running", cmd.Path)
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child holds its own descriptor
	// An *os.File, not a buffer: exec then needs no copying goroutine.
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	name := filepath.Base(cmd.Path)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		if ready(ctx, cmd.Process.Pid) {
			p.cmd, p.done = cmd, done
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited at start: %s", name, Tail(logPath))
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("%s not ready within %v: %s", name, timeout, Tail(logPath))
		case <-time.After(pollEvery):
		}
	}
}

// Stop kills the process (SIGKILL: a crash, not a shutdown) and waits for
// it to exit. Stopping a stopped Process does nothing.
func (p *Process) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	p.cmd, p.done = nil, nil
}

// Pid is the running process's id; 0 when none runs.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}
