package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"tradergate/internal/testkit"
	"tradergate/proxy"
	"tradergate/proxy/config"
)

func TestHashKey(t *testing.T) {
	var out bytes.Buffer
	// A short key needs -weak (TestHashKeyRefusesWeakKeys).
	if err := run(context.Background(), []string{"hash-key", "-weak"}, strings.NewReader("s3cret\n"), &out, io.Discard, os.Getenv); err != nil {
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

// hash-key refuses a key under 128 bits of estimated entropy unless told
// -weak, and takes what new-key prints.
func TestHashKeyRefusesWeakKeys(t *testing.T) {
	for _, weak := range []string{"s3cret", strings.Repeat("a", 27), "0123456789abcdef"} {
		err := run(context.Background(), []string{"hash-key"}, strings.NewReader(weak), io.Discard, io.Discard, os.Getenv)
		if err == nil || !strings.Contains(err.Error(), "-weak") {
			t.Errorf("hash-key took %q: %v", weak, err)
		}
	}
	// 22 random base64url characters: 131 bits by the estimate.
	for _, strong := range []string{"Zq3_k9Lm2Xv8Tn4Rw7Yb1c", "9f86d081884c7d659a2feaa0c55ad015"} {
		if err := run(context.Background(), []string{"hash-key"}, strings.NewReader(strong), io.Discard, io.Discard, os.Getenv); err != nil {
			t.Errorf("hash-key refused %q: %v", strong, err)
		}
	}
}

// new-key prints a random key with the tg_ prefix and its SHA-256 in the
// form keys[].sha256 takes; hash-key agrees, and no two keys are alike.
func TestNewKey(t *testing.T) {
	line := regexp.MustCompile(`^key: (tg_[A-Za-z0-9_-]{43})\nsha256: "([0-9a-f]{64})"\n$`)
	seen := map[string]bool{}
	for range 3 {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"new-key"}, nil, &out, io.Discard, os.Getenv); err != nil {
			t.Fatal(err)
		}
		m := line.FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("new-key printed %q", out.String())
		}
		if seen[m[1]] {
			t.Fatalf("new-key printed %s twice", m[1])
		}
		seen[m[1]] = true
		var hashed bytes.Buffer
		if err := run(context.Background(), []string{"hash-key"}, strings.NewReader(m[1]+"\n"), &hashed, io.Discard, os.Getenv); err != nil {
			t.Fatalf("hash-key refused new-key's key: %v", err)
		}
		if got := strings.TrimSpace(hashed.String()); got != m[2] || got != proxy.HashKey(m[1]) {
			t.Errorf("hash %s, hash-key %s", m[2], got)
		}
	}
}

// TestDemoCurlLines is the newcomer's path: run the demo on the embedded
// config, paste every printed curl line, get variant A answers.
func TestDemoCurlLines(t *testing.T) {
	var stdout, logs testkit.LogBuffer
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
	// The reload command names this process, the one serving (not a
	// wrapper such as go run's).
	if want := fmt.Sprintf("kill -HUP %d", os.Getpid()); !strings.Contains(stdout.String(), want) {
		t.Errorf("the demo banner does not say %q:\n%s", want, stdout.String())
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
	// Start refuses with every problem of the file, one a line.
	two := strings.NewReplacer("level: info", "level: loud", "max_events: 200000", "max_events: -5").Replace(string(embeddedConfig))
	if err := os.WriteFile(path, []byte(two), 0o600); err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), []string{"-config", path, "-demo"}, nil, io.Discard, io.Discard, os.Getenv)
	if err == nil || !strings.Contains(err.Error(), "config "+path+": 2 problems:\n\tline ") ||
		!strings.Contains(err.Error(), ": orderbook.max_events: must be 1 to 10000000, got -5\n\tline ") ||
		!strings.Contains(err.Error(), `: log.level: must be debug, info, warn or error, got "loud"`) {
		t.Errorf("run with two problems = %v", err)
	}
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }

// startMain runs m until stop is called or the test ends, and returns the
// address it serves on once it does. stop cancels the run and waits for it:
// a test calls it itself to look at what the shutdown logged.
func startMain(t *testing.T, m *Main, logs *testkit.LogBuffer) (addr string, stop func()) {
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
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("main's log:\n%s", logs)
		}
	})
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

// The memory limit comes from server.memory_limit (by default sized from
// the cache), unless GOMEMLIMIT is in the environment.
func TestMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	cfg, err := config.Parse(embeddedConfig)
	if err != nil {
		t.Fatal(err)
	}
	capped := func(limit int64) int64 {
		if c, err := memlimit.FromCgroup(); err == nil && int64(c/10*9) < limit {
			return int64(c / 10 * 9) // a container smaller than the limit
		}
		return limit
	}
	want := capped(cfg.Cache.MaxBytes*3/2 + 32<<20)
	setMemoryLimit(cfg, slogTo(io.Discard))
	if got := debug.SetMemoryLimit(-1); got != want {
		t.Errorf("memory limit %d, want %d (1.5 x cache.max_bytes + 32 MiB)", got, want)
	}

	cfg.Server.MemoryLimit = 512 << 20
	setMemoryLimit(cfg, slogTo(io.Discard))
	if got := debug.SetMemoryLimit(-1); got != capped(512<<20) {
		t.Errorf("memory limit %d, want 512 MiB (or the container's, if smaller)", got)
	}

	debug.SetMemoryLimit(123 << 20)
	t.Setenv("GOMEMLIMIT", "123MiB")
	setMemoryLimit(cfg, slogTo(io.Discard))
	if got := debug.SetMemoryLimit(-1); got != 123<<20 {
		t.Errorf("with GOMEMLIMIT set: %d, want it left alone", got)
	}
}

// The demo prints a working key, so it answers this machine only, even
// when told to listen on every interface; it says where its admin
// listener is.
func TestDemoBindsLoopbackOnly(t *testing.T) {
	var stdout, logs testkit.LogBuffer
	addr, _ := startMain(t, &Main{Demo: true, Listen: ":0", AdminListen: "0.0.0.0:0", Stdout: &stdout,
		Logger: slogTo(&logs), Getenv: func(string) string { return "" }}, &logs)
	if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" {
		t.Errorf("demo listens on %s, want 127.0.0.1", addr)
	}
	testkit.Eventually(t, "the admin line", func() bool { return strings.Contains(stdout.String(), "Admin listener") })
	if !strings.Contains(stdout.String(), "http://127.0.0.1:") || strings.Contains(stdout.String(), "127.0.0.1:0/") {
		t.Errorf("admin line: %s", stdout.String())
	}
}

func TestHelpListsCommands(t *testing.T) {
	var stderr testkit.LogBuffer
	err := run(context.Background(), []string{"-h"}, strings.NewReader(""), io.Discard, &stderr, os.Getenv)
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(stderr.String(), "hash-key") || !strings.Contains(stderr.String(), "-demo") {
		t.Errorf("-h: %v\n%s", err, stderr.String())
	}
}

// TestCheckCommand: `tradergate check` exits 0 on a file that loads, 1
// with each problem on its line when it does not, 2 on a usage error, and
// never prints the value of a variable the file names.
func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	good := strings.Replace(string(embeddedConfig), "keys: []\n",
		"keys:\n  - {id: alice, sha256: \""+proxy.HashKey("k")+"\", plan: free, routes: [\"*\"]}\n", 1)
	bad := strings.Replace(good, `listen: ":8080"`, `listen: "8080"`, 1) + "extra: 1\n"
	three := strings.NewReplacer(`listen: ":8080"`, `listen: "127.0.0.1:99999"`, "max_events: 200000", "max_events: -5",
		"sampling_ratio: 0.01", "sampling_ratio: 2").Replace(good)
	files := map[string]string{"good.yaml": good, "bad.yaml": strings.Replace(good, "level: info", "level: loud", 1),
		"unknown.yaml": bad, "three.yaml": three,
		"port.yaml": strings.Replace(good, `listen: ":8080"`, `listen: "127.0.0.1:99999"`, 1)}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const secret = "upstream-key-7d1e"
	getenv := func(k string) string {
		if k == "TRADERGATE_UPSTREAM_KEY" {
			return secret
		}
		return ""
	}
	lineOf := func(data, text string) int { return strings.Count(data[:strings.Index(data, text)], "\n") + 1 }
	for _, tc := range []struct {
		name string
		args []string
		code int      // exit status; 0: run returns nil
		want []string // lines of stdout
	}{
		{"good", []string{"check", "-config", filepath.Join(dir, "good.yaml")}, 0, []string{
			fmt.Sprintf("good.yaml:%d: note: upstream.key_env: environment variable TRADERGATE_UPSTREAM_KEY is set", lineOf(good, "  key_env:")),
			"good.yaml: OK"}},
		{"bad", []string{"check", "-config", filepath.Join(dir, "bad.yaml")}, 1, []string{
			fmt.Sprintf(`bad.yaml:%d:3: log.level: must be debug, info, warn or error, got "loud"`, lineOf(files["bad.yaml"], "level: loud")),
			"bad.yaml: 1 problem"}},
		// Three problems in three sections: all three, each on its line.
		{"three sections", []string{"check", "-config", filepath.Join(dir, "three.yaml")}, 1, []string{
			fmt.Sprintf(`three.yaml:%d:3: server.listen: port 99999 is out of range (0 to 65535), got "127.0.0.1:99999"`, lineOf(three, "listen: \"127.0.0.1:99999")),
			fmt.Sprintf("three.yaml:%d:3: orderbook.max_events: must be 1 to 10000000, got -5", lineOf(three, "max_events: -5")),
			fmt.Sprintf("three.yaml:%d:3: tracing.sampling_ratio: must be 0 to 1, got 2", lineOf(three, "sampling_ratio: 2")),
			"three.yaml: 3 problems"}},
		// An address no listener can bind is refused here, as at start.
		{"port out of range", []string{"check", "-config", filepath.Join(dir, "port.yaml")}, 1, []string{"port.yaml: 1 problem"}},
		// Decoding problems are reported before validation, as start-up
		// does: a file that does not decode is not validated.
		{"unknown field", []string{"check", "-config", filepath.Join(dir, "unknown.yaml")}, 1, []string{
			fmt.Sprintf("unknown.yaml:%d:1: extra: unknown field; known here: admin, cache, keys, legacy, limits, log, native, orderbook, plans, redis, server, streams, tracing, upstream", lineOf(bad, "extra: 1")),
			"unknown.yaml: 1 problem"}},
		{"missing file", []string{"check", "-config", filepath.Join(dir, "none.yaml")}, 1, nil},
		{"no -config", []string{"check"}, 2, nil},
		{"extra argument", []string{"check", "-config", filepath.Join(dir, "good.yaml"), "more"}, 2, nil},
		{"unknown flag", []string{"check", "-listen", ":1"}, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tc.args, strings.NewReader(""), &stdout, &stderr, getenv)
			code := 0
			if err != nil {
				code = exitCode(err)
			}
			if code != tc.code {
				t.Errorf("exit status %d (%v), want %d", code, err, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout.String(), filepath.Join(dir, w)+"\n") {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
			if strings.Contains(stdout.String()+stderr.String(), secret) {
				t.Error("the upstream key's value is printed")
			}
		})
	}
}
