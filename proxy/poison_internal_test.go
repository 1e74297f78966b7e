//go:build poison

package proxy

import (
	"context"
	"strings"
	"testing"

	"tradergate/internal/poison"
	"tradergate/proxy/route"
)

// What a request hands on to work that outlives serve (its id, its
// canonical request: what a Fetch keeps) is copied at handOn and
// route.Request.Own; the exchange then goes back to its pool, which under
// the poison tag overwrites its buffers. With the copies made, the handed
// values survive the release; with them left out (poison.SkipCopies) they
// read the fill: the test sees the bug class it is there to catch.
func TestReleasedExchangePoisonsWhatWasNotCopied(t *testing.T) {
	table := route.NewTable()
	const target = "/v1/trader/0x00000000000000000000000000000000000000aa/activity?limit=7"
	for _, tc := range []struct {
		name    string
		skip    bool
		garbage bool
	}{
		{"copied", false, false},
		{"copies left out", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			poison.SkipCopies(tc.skip)
			defer poison.SkipCopies(false)
			x := (&Server{}).pooledExchange(context.Background())
			x.CopyTarget([]byte(target))
			requestID(&x.learnt, x.IncomingID)
			rt, param := table.Match(x.Path)
			if rt == nil {
				t.Fatal("no route")
			}
			if err := rt.ValidateInto(&x.reqBuf, param, x.RawQuery); err != nil {
				t.Fatal(err)
			}
			x.req = &x.reqBuf
			wantID, wantKey, wantQuery := strings.Clone(x.id), strings.Clone(x.req.Key), strings.Clone(x.req.RawQuery)

			h, req := x.handOn(), x.req.Own()
			x.Release()

			garbage := h.id != wantID || req.Key != wantKey || req.RawQuery != wantQuery
			if garbage != tc.garbage {
				t.Errorf("after release: id %q key %q query %q; want garbage: %v", h.id, req.Key, req.RawQuery, tc.garbage)
			}
			if tc.garbage && (strings.IndexByte(h.id, poison.Pattern) < 0 || strings.IndexByte(req.Key, poison.Pattern) < 0) {
				t.Errorf("the fill is not what reads: id %q key %q", h.id, req.Key)
			}
		})
	}
}
