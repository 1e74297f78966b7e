package serve

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestHTTPServesUntilTheContextEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- HTTP(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "ok")
		}))
	}()
	res, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(b) != "ok" {
		t.Fatalf("body %q", b)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stopped with %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("HTTP did not return after its context ended")
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Error("the listener still accepts after the stop")
	}
}

// A server that stops by itself (its listener failed) is an error at
// once, without waiting for the context.
func TestUntilReturnsServesError(t *testing.T) {
	failed := errors.New("accept: broken")
	err := Until(context.Background(), func() error { return failed }, func(context.Context) error {
		t.Error("shutdown called for a server that had stopped")
		return nil
	})
	if !errors.Is(err, failed) {
		t.Fatalf("got %v, want %v", err, failed)
	}
}

// A shutdown that runs out of grace is not an error; one that fails
// otherwise is.
func TestUntilShutdownErrors(t *testing.T) {
	for _, tc := range []struct {
		shutdownErr, want error
	}{
		{context.DeadlineExceeded, nil},
		{errors.New("close: broken"), errors.New("close: broken")},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		cancel()
		err := Until(ctx, func() error { <-stopped; return http.ErrServerClosed }, func(context.Context) error {
			close(stopped)
			return tc.shutdownErr
		})
		if (err == nil) != (tc.want == nil) || (err != nil && err.Error() != tc.want.Error()) {
			t.Errorf("shutdown error %v: got %v, want %v", tc.shutdownErr, err, tc.want)
		}
	}
}
