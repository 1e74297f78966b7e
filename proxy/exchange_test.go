package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tradergate/internal/testkit"
	"tradergate/proxy/route"
)

// A panic in a step is a 500 in the envelope and a log line with its stack.
// Nothing is on the wire before serve returns, so the 500 replaces
// whatever the step had set, but keeps the fields every answer carries.
func TestPanicIsA500AndALogLine(t *testing.T) {
	var logs testkit.LogBuffer
	s := &Server{cfg: &Config{}, log: logs.Logger(), now: time.Now, routes: route.NewTable()}
	var err error
	if s.metrics, err = newMetrics(prometheus.NewRegistry(), s); err != nil {
		t.Fatal(err)
	}
	x := newExchange(context.Background())
	x.method = methodGet
	x.setTarget("/v1/tx/x")
	func() {
		s.begin(x)
		defer s.finish(x)
		defer s.recoverPanics(x)
		x.setHeader("X-Ratelimit-Limit", "10")
		x.always = x.nh
		x.setHeader("Etag", `"half-made"`)
		panic("boom")
	}()
	if x.status != 500 || string(x.body) != `{"message":"Internal server error","status_code":"0","data":null}` {
		t.Errorf("panic answered %d %s", x.status, x.body)
	}
	if x.header("Etag") != "" || x.header("X-Ratelimit-Limit") != "10" || x.header("X-Request-Id") != x.id || x.header("Cache-Control") != "no-store" {
		t.Errorf("headers after the panic: %v", x.headers[:x.nh])
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
		x := &exchange{request: request{incomingID: in}}
		requestID(&x.learnt, x.incomingID)
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
	ks := newKeySet([]KeyConfig{{ID: "long", SHA256: HashKey(key), Plan: "free"}}, nil, nil)
	auth := "Bearer " + key
	if ks.lookup(auth) == nil {
		t.Fatal("the key is not found")
	}
	if n := testing.AllocsPerRun(100, func() { ks.lookup(auth) }); n != 0 {
		t.Errorf("%v allocations per lookup", n)
	}
}

// The answer's fields keep one value per name, whatever names share a bit
// of exchange.named: a name set twice is replaced in place, one never set
// reads "", and a deleted one can be set again.
func TestHeaderFieldsByName(t *testing.T) {
	names := []string{"X-Request-Id", "X-Cache", "Cache-Status", "Age", "Cache-Control", "Vary", "Etag",
		"Content-Encoding", "Content-Type", "X-Content-Type-Options", "RateLimit", "RateLimit-Policy"}
	// Two more names sharing a bit with names above, found here so that
	// the test holds whatever nameBit's formula.
	for i := 0; len(names) < 14; i++ {
		n := "X-F" + strings.Repeat("f", i)
		for _, m := range names[:12] {
			if nameBit(n) == nameBit(m) && n != m {
				names = append(names, n)
				break
			}
		}
	}
	x := newExchange(context.Background())
	for _, n := range names {
		x.setHeader(n, "1 "+n)
	}
	for _, n := range names {
		x.setHeader(n, "2 "+n)
	}
	if x.nh != len(names) {
		t.Fatalf("%d fields for %d names", x.nh, len(names))
	}
	for i, n := range names {
		if x.headers[i].name != n || x.header(n) != "2 "+n {
			t.Errorf("field %d: %+v, header(%q) = %q", i, x.headers[i], n, x.header(n))
		}
	}
	if x.header("Retry-After") != "" {
		t.Error("a name never set has a value")
	}
	x.delHeader(names[2])
	x.setHeader(names[2], "3")
	if x.nh != len(names) || x.headers[x.nh-1] != (field{names[2], "3"}) {
		t.Errorf("deleted then set: %+v", x.headers[:x.nh])
	}
}

// header returns the value set for name, or "".
func (x *exchange) header(name string) string {
	if x.named&nameBit(name) == 0 {
		return ""
	}
	for _, f := range x.headers[:x.nh] {
		if f.name == name {
			return f.value
		}
	}
	return ""
}
