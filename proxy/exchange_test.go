package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tradergate/internal/testkit"
	"tradergate/proxy/config"
	"tradergate/proxy/route"
	"tradergate/proxy/wire"
)

// A panic in a step is a 500 in the envelope and a log line with its stack.
// Nothing is on the wire before serve returns, so the 500 replaces
// whatever the step had set, but keeps the fields every answer carries.
func TestPanicIsA500AndALogLine(t *testing.T) {
	var logs testkit.LogBuffer
	s := &Server{cfg: &config.Config{}, log: logs.Logger(), now: time.Now, routes: route.NewTable()}
	var err error
	if s.metrics, err = newMetrics(prometheus.NewRegistry(), s); err != nil {
		t.Fatal(err)
	}
	x := s.newExchange(context.Background())
	x.Method = methodGet
	x.SetTarget("/v1/tx/x")
	func() {
		s.begin(x)
		defer s.finish(x)
		defer s.recoverPanics(x)
		x.SetHeader("X-Ratelimit-Limit", "10")
		x.MarkAlways()
		x.SetHeader("Etag", `"half-made"`)
		panic("boom")
	}()
	if x.Status != 500 || string(x.Body) != `{"message":"Internal server error","status_code":"0","data":null}` {
		t.Errorf("panic answered %d %s", x.Status, x.Body)
	}
	if x.header("Etag") != "" || x.header("X-Ratelimit-Limit") != "10" || x.header("X-Request-Id") != x.id || x.header("Cache-Control") != "no-store" {
		t.Errorf("headers after the panic: %v", x.Headers())
	}
	if !strings.Contains(logs.String(), `"msg":"panic in handler"`) || !strings.Contains(logs.String(), "boom") {
		t.Errorf("no log line for the panic: %s", logs.String())
	}
}

// Request ids reveal nothing: 128 random bits each, no shared prefix or
// sequence a client could sample; a client's own id is kept only when it
// is short and printable.
func TestRequestIDKeptOrMade(t *testing.T) {
	seen := map[string]bool{}
	var prev [32]byte
	for range 1000 {
		var b [32]byte
		newRequestID(&b)
		id := string(b[:])
		if seen[id] || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("id %q repeated or not hex", id)
		}
		if [8]byte(b[:8]) == [8]byte(prev[:8]) {
			t.Errorf("ids %q and %q share a prefix", prev[:], id)
		}
		seen[id], prev = true, b
	}
	for in, keep := range map[string]bool{"trace-12345678": true, "short": false, "bad id with spaces": false,
		strings.Repeat("a", 65): false, "id\x00with-nul": false, "éééééééé": false} {
		x := &exchange{Request: wire.Request{IncomingID: in}}
		requestID(&x.learnt, x.IncomingID)
		if (x.id == in) != keep || len(x.id) < 8 {
			t.Errorf("requestID(%q) = %q", in, x.id)
		}
	}
}

// A key is looked up without an allocation whatever its length: the
// bench's keys are longer than the 32 bytes a []byte conversion keeps on
// the stack.
func TestKeyLookupAllocatesNothing(t *testing.T) {
	key := strings.Repeat("k", maxKeyLen)
	ks := newKeySet([]config.KeyConfig{{ID: "long", SHA256: HashKey(key), Plan: "free"}}, nil, nil)
	auth := "Bearer " + key
	if ks.lookup(auth) == nil {
		t.Fatal("the key is not found")
	}
	if n := testing.AllocsPerRun(100, func() { ks.lookup(auth) }); n != 0 {
		t.Errorf("%v allocations per lookup", n)
	}
}

// header returns the value set for name, or "".
func (x *exchange) header(name string) string {
	for _, f := range x.Headers() {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}
