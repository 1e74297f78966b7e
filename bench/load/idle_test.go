package load

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestRunIdle opens idle connections to a loopback TLS server over
// HTTP/1.1 and over HTTP/2: each makes its one request on a connection of
// its own, all stay open while the memory is read, and none is closed
// before the run ends.
func TestRunIdle(t *testing.T) {
	// peak is the most connections open at once: with every connection
	// idle after its request, all of them; with connections closed after
	// it, no more than the dialers at work.
	var open, peak atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Proto", r.Proto)
		_, _ = w.Write([]byte("tx"))
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			n := open.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(srv.URL, "https://")
	for _, h2 := range []bool{false, true} {
		peak.Store(0)
		res, err := Run(context.Background(), Spec{
			Addr: addr, Mode: ModeIdle, URLs: []string{"/v1/tx"}, Connections: 40, Duration: 300 * time.Millisecond,
			ServerCPU: -1, LoadCPU: -1, ServerPGID: syscall.Getpgrp(), Headers: []string{"Authorization: Bearer k"},
			TLS: &TLSSpec{CAFile: ca, ServerName: "example.com", HTTP2: h2},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.IdleConns != 40 || res.Requests != 40 || res.Errors != 0 || res.Status[200] != 40 || !res.RSSMeasured || res.IdleRSSBefore == 0 || res.ServerRSS == 0 {
			t.Fatalf("h2 %v: %+v", h2, res)
		}
		if n := peak.Load(); n != 40 {
			t.Errorf("h2 %v: at most %d connections open at once, want all 40", h2, n)
		}
		eventually(t, func() bool { return open.Load() == 0 })
	}
	// HTTP/2 offered to a server that speaks only HTTP/1.1 is an error per
	// connection, not a row measured on the wrong protocol.
	h1only := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	h1only.TLS = &tls.Config{NextProtos: []string{"http/1.1"}}
	h1only.StartTLS()
	t.Cleanup(h1only.Close)
	_, err := Run(context.Background(), Spec{
		Addr: strings.TrimPrefix(h1only.URL, "https://"), Mode: ModeIdle, URLs: []string{"/"}, Connections: 2, Duration: 100 * time.Millisecond,
		ServerCPU: -1, LoadCPU: -1, ServerPGID: syscall.Getpgrp(),
		TLS: &TLSSpec{CAFile: ca, ServerName: "example.com", HTTP2: true},
	})
	if err == nil {
		t.Fatal("HTTP/2 idle run against an HTTP/1.1-only server: no error")
	}
}

func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 5s")
}
