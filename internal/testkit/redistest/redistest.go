// Package redistest runs throwaway Redis deployments for tests, so that
// code using Redis is tested against a real redis-server, never a mock:
// one server (Start, StartWith), a Redis Cluster (StartCluster), a
// master watched by a Sentinel (StartSentinel), and an address that accepts
// connections and never answers (Stalled).
//
// Each server runs its own redis-server on a free loopback port, with no
// persistence (--save "" --appendonly no) and its working files in a
// temporary directory, so tests never touch a Redis the machine already runs
// (such as one on 6379).
//
// redis-server (and, for a cluster, redis-cli from Debian's redis-tools)
// must be on PATH. When one is not, the test is skipped, unless the
// environment variable CI is set (to anything non-empty): CI installs them,
// so there a missing binary fails the test instead of silently skipping the
// Redis half of the suite.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"tradergate/internal/testkit"
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
	// args and password are how launch was told to start the server; every
	// restart reuses them.
	args     func(dir string, port int) ([]string, error)
	password string

	proc testkit.Process
	runs int // starts so far, which name the log files
}

// Start launches a redis-server and waits until it answers PING. t.Cleanup
// stops it.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return launch(tb, nil, "")
}

// Options change how StartWith launches a server.
type Options struct {
	// Password is set as requirepass, so clients must AUTH with it. "": no
	// password.
	Password string
}

// StartWith is Start with Options.
func StartWith(tb testing.TB, o Options) *Server {
	tb.Helper()
	var args func(dir string, port int) ([]string, error)
	if o.Password != "" {
		args = func(string, int) ([]string, error) { return []string{"--requirepass", o.Password}, nil }
	}
	return launch(tb, args, o.Password)
}

// launch starts a server on a free port. args gives the arguments the kind
// of server needs beyond the common ones (cluster mode, sentinel config); it
// may write files into the server's directory. password is what the start
// probe authenticates with.
func launch(tb testing.TB, args func(dir string, port int) ([]string, error), password string) *Server {
	tb.Helper()
	s := &Server{tb: tb, bin: redisServer(tb), dir: tb.TempDir(), args: args, password: password}
	tb.Cleanup(s.Stop)
	// The free port is found by binding :0 and releasing it, so another
	// process may take it before redis-server binds; try a few.
	var lastErr error
	for range 5 {
		if s.port, lastErr = testkit.FreePort(); lastErr != nil {
			continue
		}
		if lastErr = s.start(); lastErr == nil {
			return s
		}
	}
	tb.Fatalf("redistest: start redis-server: %v", lastErr)
	return nil
}

// redisServer finds the binary, or ends the test: skipped, or failed under CI.
func redisServer(tb testing.TB) string {
	tb.Helper()
	return testkit.Binary(tb, "redis-server", "redis-server")
}

// Addr is host:port of the server.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is redis://host:port/0, for clients configured by URL.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Stop kills the server (SIGKILL: a crash, not a shutdown) and waits for it
// to exit. Its data is lost. Stopping a stopped server does nothing.
func (s *Server) Stop() { s.proc.Stop() }

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

// start launches the process on s.port and waits for it to answer.
func (s *Server) start() error {
	s.runs++
	var argv []string
	if s.args != nil {
		var err error
		if argv, err = s.args(s.dir, s.port); err != nil {
			return err
		}
	}
	cmd := exec.Command(s.bin, append(argv,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
	)...)
	logPath := filepath.Join(s.dir, fmt.Sprintf("redis-%d.log", s.runs))
	addr := s.Addr()
	return s.proc.Start(cmd, logPath, startTimeout, func(_ context.Context, pid int) bool {
		// Ask for the pid, not just PING: if another process took the
		// port, its server must not pass for ours.
		got, err := serverPID(addr, s.password)
		return err == nil && got == pid
	})
}

// serverPID asks INFO server; a server that answers is up, and process_id
// says which one it is.
func serverPID(addr, password string) (int, error) {
	info, err := command(addr, password, "INFO", "server")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server has no process_id")
}

// command sends one command in RESP on a fresh connection, after AUTH when
// password is set, and returns its reply if that is a status, an integer or
// a bulk string. It needs no client library, so redistest tests the client
// without depending on it.
func command(addr, password string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	var req []byte
	if password != "" {
		req = appendCommand(req, "AUTH", password)
	}
	req = appendCommand(req, args...)
	if _, err := c.Write(req); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	if password != "" {
		if _, err := readReply(r); err != nil {
			return "", fmt.Errorf("AUTH: %w", err)
		}
	}
	return readReply(r)
}

func appendCommand(b []byte, args ...string) []byte {
	b = fmt.Appendf(b, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis replied %q", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bulk reply %q", line)
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		return string(b[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}
