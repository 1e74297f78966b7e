package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"tradergate/proxy"
)

func TestHashKey(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"hash-key"}, strings.NewReader("s3cret\n"), &out, io.Discard, os.Getenv); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(out.String()), proxy.HashKey("s3cret"); got != want || len(got) != 64 {
		t.Errorf("hash-key = %q, want %q", got, want)
	}
	for _, in := range []string{"", "\n", " padded "} {
		if err := run(context.Background(), []string{"hash-key"}, strings.NewReader(in), io.Discard, io.Discard, os.Getenv); err == nil {
			t.Errorf("hash-key accepted %q", in)
		}
	}
}

// lockedBuffer is an io.Writer safe for the server goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDemoCurlLines is the newcomer's path: run the demo on the embedded
// config, paste every printed curl line, get variant A answers.
func TestDemoCurlLines(t *testing.T) {
	var stdout, logs lockedBuffer
	_, stop := startMain(t, &Main{Demo: true, Listen: "127.0.0.1:0", AdminListen: "off", Stdout: &stdout,
		Logger: slogTo(&logs), Getenv: func(string) string { return "" }}, &logs)

	curl := regexp.MustCompile(`curl -s -H 'Authorization: Bearer ([^']+)' '([^']+)'`)
	lines := curl.FindAllStringSubmatch(stdout.String(), -1)
	if len(lines) < 9 {
		t.Fatalf("demo printed %d curl lines:\n%s", len(lines), stdout.String())
	}
	for _, l := range lines {
		req, _ := http.NewRequest(http.MethodGet, l[2], nil)
		req.Header.Set("Authorization", "Bearer "+l[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var env struct {
			Message    string          `json:"message"`
			StatusCode string          `json:"status_code"`
			Data       json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(body, &env); err != nil || resp.StatusCode != 200 || env.StatusCode != "1" || env.Message != "OK" {
			t.Errorf("%s: %d %.200s", l[2], resp.StatusCode, body)
		}
		if string(env.Data) == "null" || strings.Contains(string(env.Data), `"items":[]`) {
			t.Errorf("%s: the demo line shows no data: %.200s", l[2], body)
		}
	}
	stop() // the shutdown's lines too must not hold the key
	if key := lines[0][1]; strings.Contains(logs.String(), key) {
		t.Error("the demo key appears in the logs")
	}
}

func TestEmbeddedConfigNeedsKeysOutsideDemo(t *testing.T) {
	m := &Main{Stdout: io.Discard, Logger: slogTo(io.Discard), Getenv: func(string) string { return "x" }}
	err := m.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "keys: at least one key is required") {
		t.Errorf("Run = %v", err)
	}
}

func TestConfigFileErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(path, append([]byte("bogus: 1\n"), embeddedConfig...), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"-config", path}, nil, io.Discard, io.Discard, os.Getenv)
	if err == nil || !strings.Contains(err.Error(), "bogus: unknown field") || strings.Contains(err.Error(), "\n") {
		t.Errorf("run = %v", err)
	}
	err = run(context.Background(), []string{"-config", filepath.Join(dir, "missing.yaml")}, nil, io.Discard, io.Discard, os.Getenv)
	if err == nil {
		t.Error("missing config file accepted")
	}
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }

// startMain runs m until stop is called or the test ends, and returns the
// address it serves on once it does. stop cancels the run and waits for it:
// a test calls it itself to look at what the shutdown logged.
func startMain(t *testing.T, m *Main, logs *lockedBuffer) (addr string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	m.Ready = func(addr string) { ready <- addr }
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v\n%s", err, logs.String())
			}
		})
	}
	t.Cleanup(stop)
	select {
	case addr = <-ready:
		return addr, stop
	case err := <-done:
		done <- err // for stop
		t.Fatalf("Run: %v\n%s", err, logs.String())
	case <-time.After(10 * time.Second):
		t.Fatal("not serving within 10s")
	}
	return "", stop
}
