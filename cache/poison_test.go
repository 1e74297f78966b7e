//go:build poison

package cache

import (
	"context"
	"sync/atomic"
	"testing"
	"unsafe"

	"tradergate/internal/poison"
)

// A flight outlives the Get that started it, and its key with it: the
// cache copies the key there (ownKey), since the caller's is often a
// buffer it reuses (the edge's pooled exchanges). Under the poison tag the
// caller's buffer is overwritten once its Get returns, as a pool does;
// with the copy, a second Get of the same key joins the flight or hits its
// page; with the copy left out (poison.SkipCopies), the flight and the
// store hold garbage, and the second Get fetches again. The second case
// shows that the fill catches a missing copy.
func TestAFlightKeepsItsOwnKey(t *testing.T) {
	for _, tc := range []struct {
		name      string
		skip      bool
		refetches int64
	}{
		{"copied", false, 0},
		{"copy left out", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			poison.SkipCopies(tc.skip)
			defer poison.SkipCopies(false)
			c := newTestCache(t, Config{}, nil, Options{})

			buf := []byte("r|0x00000000000000000000000000000000000000aa?limit=7")
			want := string(buf)
			key := unsafe.String(&buf[0], len(buf))
			started, gate := make(chan struct{}), make(chan struct{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				<-started
				cancel() // the caller leaves; its flight goes on
			}()
			_, err := c.Get(ctx, key, func(context.Context, func() bool) ([]byte, Facts, error) {
				close(started)
				<-gate
				return []byte("page"), liveFacts, nil
			})
			if err == nil {
				t.Fatal("Get returned before its caller left")
			}
			poison.Fill(buf) // the caller's memory goes back to its pool

			var refetches atomic.Int64
			close(gate)
			r, err := c.Get(context.Background(), want, counting(&refetches, "page", liveFacts))
			if err != nil || string(r.Entry.Body()) != "page" {
				t.Fatalf("second Get: %v", err)
			}
			if n := refetches.Load(); n != tc.refetches {
				t.Errorf("the second Get fetched %d times, want %d (status %v)", n, tc.refetches, r.Status)
			}
		})
	}
}
