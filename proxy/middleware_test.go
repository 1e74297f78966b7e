package proxy

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestPanicIsA500AndALogLine(t *testing.T) {
	var logs bytes.Buffer
	s := &Server{log: slog.New(slog.NewJSONHandler(&logs, nil)), now: time.Now, ids: newIDSource()}
	var err error
	if s.metrics, err = newMetrics(prometheus.NewRegistry(), s); err != nil {
		t.Fatal(err)
	}
	h := chain(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }),
		s.observe, s.recoverPanics)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/tx/x", nil))
	if rec.Code != 500 || rec.Body.String() != `{"message":"Internal server error","status_code":"0","data":null}` {
		t.Errorf("panic answered %d %s", rec.Code, rec.Body)
	}
	if !strings.Contains(logs.String(), `"msg":"panic in handler"`) || !strings.Contains(logs.String(), "boom") {
		t.Errorf("no log line for the panic: %s", logs.String())
	}

	// Once the headers are out, all that can be done is to cut the response.
	h = chain(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(200)
		panic("late")
	}), s.observe, s.recoverPanics)
	srv := httptest.NewServer(h)
	defer srv.Close()
	srv.Config.ErrorLog = slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)
	resp, err := srv.Client().Get(srv.URL)
	if err == nil {
		_, err = resp.Body.Read(make([]byte, 1))
		resp.Body.Close()
	}
	if err == nil {
		t.Error("a panic after the headers did not cut the response")
	}
}

func TestRequestIDKeptOrMade(t *testing.T) {
	ids := newIDSource()
	if a, b := ids.next(), ids.next(); a == b || len(a) != 32 || a[:16] != b[:16] {
		t.Errorf("ids %q then %q", a, b)
	}
	for in, keep := range map[string]bool{"trace-12345678": true, "short": false, "bad id with spaces": false, strings.Repeat("a", 65): false} {
		got := (&Server{ids: newIDSource()}).requestID(in)
		if (got == in) != keep || len(got) < 8 {
			t.Errorf("requestID(%q) = %q", in, got)
		}
	}
}
