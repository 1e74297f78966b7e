package front

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"tradergate/proxy/wire"
)

// emfileChildEnv marks the process TestAcceptSurvivesEMFILE starts to
// serve under a low descriptor limit, so that the test's own process
// keeps its limit.
const emfileChildEnv = "TRADERGATE_TEST_EMFILE_CHILD"

// A process out of descriptors keeps serving: an accept that fails with
// EMFILE is retried once a connection closes, and counted. Without the
// retry, fasthttp's Serve ends on the first such error, and the edge with
// it.
func TestAcceptSurvivesEMFILE(t *testing.T) {
	if os.Getenv(emfileChildEnv) == "1" {
		emfileChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAcceptSurvivesEMFILE$")
	cmd.Env = append(os.Environ(), emfileChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	defer func() {
		if !exited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("server's log:\n%s", stderr.String())
		}
	}()
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		t.Fatalf("the server's first line %q, %v", line, err)
	}

	// Connections that were answered, each holding a descriptor of the
	// server, until one is not accepted: the server is out of them.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	var waiting net.Conn
	for range 100 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("after %d connections: %v", len(held), err)
		}
		if _, err := get(c, 500*time.Millisecond); err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("after %d connections: %v", len(held), err)
			}
			waiting = c
			break
		}
		held = append(held, c)
	}
	if waiting == nil {
		t.Fatalf("%d connections accepted: the limit was not reached", len(held))
	}
	defer waiting.Close()

	// Closing a few gives their descriptors back: the waiting connection
	// is accepted and answered, and so is a new one.
	for _, c := range held[:3] {
		c.Close()
	}
	held = held[3:]
	body, err := read(waiting, 5*time.Second)
	if err != nil {
		t.Fatalf("the connection waiting while the server was out of descriptors: %v", err)
	}
	if n, _ := strconv.Atoi(body); n < 1 {
		t.Errorf("accept errors counted under emfile: %q, want at least 1", body)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := get(c, 5*time.Second); err != nil {
		t.Fatalf("a new connection after: %v", err)
	}

	// Told to stop, the server drains and ends without an error.
	stdin.Close()
	rest, _ := io.ReadAll(out)
	err = cmd.Wait()
	exited = true
	if err != nil || !strings.Contains(string(rest), "served: <nil>") {
		t.Errorf("the server ended with %v, its output %q", err, rest)
	}
	logs := stderr.String()
	for _, want := range []string{"accept failed; retrying", "server.max_connections is above what the descriptor limit"} {
		if !strings.Contains(logs, want) {
			t.Errorf("no %q in the server's log", want)
		}
	}
}

// get sends a request on c and reads its answer's body.
func get(c net.Conn, within time.Duration) (string, error) {
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: edge.test\r\n\r\n"); err != nil {
		return "", err
	}
	return read(c, within)
}

func read(c net.Conn, within time.Duration) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(within))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return string(b), err
}

// emfileChild serves, under a descriptor limit a few above what it holds
// once listening, answering every request with the count of accepts that
// failed with EMFILE, until its standard input ends.
func emfileChild() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		panic(err)
	}
	// Less the one that read the directory.
	lim := syscall.Rlimit{Cur: uint64(len(fds) - 1 + 6)}
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
		panic(err)
	}
	lim.Max = was.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		panic(err)
	}
	var c Config
	c.ApplyDefaults()
	c.MaxConnections, c.MaxConnectionsPerAddress = 64, -1
	c.ShutdownTimeout = 2 * time.Second
	steps := &countSteps{}
	e := New(c, steps, Options{Log: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	steps.e = e

	ctx, stop := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	fmt.Printf("listening %s\n", ln.Addr())
	err = e.Serve(ctx, ln, Beside{})
	fmt.Printf("served: %v\n", err)
}

// countSteps answers every request with the EMFILE count of e's listener.
type countSteps struct{ e *Edge }

func (s *countSteps) Exchange(context.Context, bool) wire.Exchange {
	return &countExchange{e: s.e}
}

type countExchange struct {
	e  *Edge
	in wire.Request
}

func (x *countExchange) In() *wire.Request { return &x.in }
func (x *countExchange) Release()          {}
func (x *countExchange) Serve() *wire.Answer {
	return &wire.Answer{Status: http.StatusOK, Body: strconv.AppendUint(nil, x.e.accepts.count(listenerClient, 0), 10)}
}
