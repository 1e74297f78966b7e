// Package redistest runs a throwaway redis-server for tests (DESIGN "Scale
// beyond one machine": tests use a real redis-server, never a mock).
//
// Each Start launches its own redis-server on a free loopback port, with no
// persistence (--save "" --appendonly no) and its working files in a
// temporary directory, so tests never touch a Redis the machine already runs
// (such as one on 6379).
//
// redis-server must be on PATH. When it is not, Start skips the test, unless
// the environment variable CI is set (to anything non-empty): CI installs
// redis-server, so there a missing binary fails the test instead of silently
// skipping the Redis half of the suite.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// startTimeout bounds how long a starting server may take to answer PING.
const startTimeout = 10 * time.Second

// Server is one redis-server process. Its methods must be called from the
// test's goroutine (they may call t.Fatal).
type Server struct {
	tb   testing.TB
	bin  string
	dir  string
	port int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	runs int
}

// Start launches a redis-server and waits until it answers PING. t.Cleanup
// stops it.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("redistest: redis-server not on PATH and CI is set: install it (apt-get install redis-server): %v", err)
		}
		tb.Skipf("redistest: redis-server not on PATH, skipping (install it; with CI set this fails): %v", err)
	}
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir()}
	tb.Cleanup(s.Stop)
	// The free port is found by binding :0 and releasing it, so another
	// process may take it before redis-server binds; try a few.
	var lastErr error
	for range 5 {
		if s.port, lastErr = freePort(); lastErr != nil {
			continue
		}
		if lastErr = s.start(); lastErr == nil {
			return s
		}
	}
	tb.Fatalf("redistest: start redis-server: %v", lastErr)
	return nil
}

// Addr is host:port of the server.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is redis://host:port/0, the form of limits.redis_url.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Stop kills the server (SIGKILL: a crash, not a shutdown) and waits for it
// to exit. Its data is lost. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd, s.done = nil, nil
}

// Restart stops the server if it runs and starts a fresh, empty one on the
// same port, so clients holding the address reconnect to it.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	// The port was just ours; only a stray process could take it, and a
	// port in TIME_WAIT does not stop redis-server (it sets SO_REUSEADDR).
	var err error
	deadline := time.Now().Add(startTimeout)
	for {
		if err = s.start(); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		s.tb.Fatalf("redistest: restart redis-server on port %d: %v", s.port, err)
	}
}

// start launches the process on s.port and waits for PING.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs++
	logPath := filepath.Join(s.dir, fmt.Sprintf("redis-%d.log", s.runs))
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
	)
	// An *os.File, not a buffer: exec then needs no copying goroutine.
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()

	addr := s.Addr()
	deadline := time.Now().Add(startTimeout)
	for {
		// Ask for the pid, not just PING: if another process took the port,
		// its server must not pass for ours.
		if pid, err := serverPID(addr); err == nil && pid == cmd.Process.Pid {
			s.cmd, s.done = cmd, done
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("redis-server exited at start: %s", tail(logPath))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("redis-server did not answer PING within %v: %s", startTimeout, tail(logPath))
		}
	}
}

// serverPID sends PING and INFO server in RESP; a server that answers both
// is up, and process_id says which one it is.
func serverPID(addr string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")); err != nil {
		return 0, err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return 0, fmt.Errorf("PING answered %q", line)
	}
	line, err = r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "$"))
	if err != nil || !strings.HasPrefix(line, "$") {
		return 0, fmt.Errorf("INFO answered %q", line)
	}
	info := make([]byte, n)
	if _, err := io.ReadFull(r, info); err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(info), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server has no process_id")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail is the end of a log file, for failure messages.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	const n = 2000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
