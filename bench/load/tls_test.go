package load

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunNewConnections drives a loopback TLS server with a connection
// per request, without and with session resumption, and checks that each
// request opened its own connection and that resumption took.
func TestRunNewConnections(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Connection") != "close" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Cache", "HIT")
		_, _ = w.Write([]byte("tx"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(srv.URL, "https://")
	for _, resume := range []bool{false, true} {
		before := conns.Load()
		res, err := Run(context.Background(), Spec{
			Addr: addr, Mode: ModeList, URLs: []string{"/v1/tx"}, Connections: 2, Duration: 200 * time.Millisecond,
			ServerCPU: -1, LoadCPU: -1, SampleCache: true,
			TLS: &TLSSpec{CAFile: ca, ServerName: "example.com", NewConnection: true, Resume: resume},
		})
		if err != nil {
			t.Fatal(err)
		}
		opened := conns.Load() - before
		if res.Requests < 10 || res.Errors != 0 || res.Handshakes < res.Requests-2 || opened < res.Requests {
			t.Fatalf("resume %v: %d requests, %d errors, %d handshakes, %d connections opened", resume, res.Requests, res.Errors, res.Handshakes, opened)
		}
		if !resume && res.Resumed != 0 {
			t.Fatalf("%d handshakes resumed without a session cache", res.Resumed)
		}
		if resume && res.Resumed < res.Handshakes*9/10 {
			t.Fatalf("resumed %d of %d handshakes", res.Resumed, res.Handshakes)
		}
	}

	// A client that does not trust the server's certificate fails the run.
	other := filepath.Join(t.TempDir(), "other.pem")
	if err := os.WriteFile(other, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Run(context.Background(), Spec{Addr: addr, Mode: ModeList, URLs: []string{"/"}, Duration: time.Second, TLS: &TLSSpec{CAFile: other, ServerName: "example.com", NewConnection: true}})
	if err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("err = %v", err)
	}
	_, err = Run(context.Background(), Spec{Addr: addr, Mode: ModeList, URLs: []string{"/"}, Duration: time.Second, TLS: &TLSSpec{CAFile: ca, ServerName: "example.com", Resume: true}})
	if err == nil || !strings.Contains(err.Error(), "Resume needs NewConnection") {
		t.Fatalf("err = %v", err)
	}
}

// TestRedisCommandStatsLive reads INFO commandstats off a real
// redis-server on loopback, when one is installed.
func TestRedisCommandStatsLive(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed (apt-get install redis-server)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	var before map[string]int64
	for deadline := time.Now().Add(10 * time.Second); ; {
		if before, err = RedisCommandStats(addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server never answered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 64)
	for range 3 {
		if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	after, err := RedisCommandStats(addr)
	if err != nil {
		t.Fatal(err)
	}
	if d := RedisDelta(before, after); d["ping"] != 3 || len(d) != 1 {
		t.Fatalf("delta %v, want ping 3 alone", d)
	}
}
