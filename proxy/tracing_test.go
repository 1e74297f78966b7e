package proxy_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"tradergate/proxy/config"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// With tracing on, a miss is a request span with the cache lookup, the
// legacy fetch and its HTTP call under it, and the legacy host receives
// the trace's traceparent; a hit is the request and the lookup alone. The
// request id and route are attributes; no key is.
func TestTracingSpanTrees(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	var mu sync.Mutex
	var seen []string
	e := newEdge(t, func(s *edgeSetup) { s.spans = rec }, withConfig(func(c *config.Config) { c.Tracing.SamplingRatio = 1 }),
		withUpstream(func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, r.Header.Get("Traceparent"))
				mu.Unlock()
				next.ServeHTTP(w, r)
			})
		}))
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tx := "/v1/tx/" + e.sim.TradeTxs()[0]
	e.get(tx, "Traceparent", caller, "X-Request-Id", "trace-request-1")
	e.get(tx, "X-Request-Id", "trace-request-2")

	spans := rec.Ended()
	byName := map[string][]int{}
	for i, s := range spans {
		byName[s.Name()] = append(byName[s.Name()], i)
	}
	if len(byName["tradergate.request"]) != 2 || len(byName["cache.lookup"]) != 2 || len(byName["upstream.fetch"]) != 1 {
		names := []string{}
		for _, s := range spans {
			names = append(names, s.Name())
		}
		t.Fatalf("spans %v", names)
	}
	miss := spans[byName["tradergate.request"][0]]
	if miss.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || miss.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("the miss's span is not a child of the caller's: trace %s parent %s", miss.SpanContext().TraceID(), miss.Parent().SpanID())
	}
	lookup := spans[byName["cache.lookup"][0]]
	fetch := spans[byName["upstream.fetch"][0]]
	if lookup.Parent().SpanID() != miss.SpanContext().SpanID() || fetch.Parent().SpanID() != lookup.SpanContext().SpanID() {
		t.Errorf("the miss's tree: lookup under %s, fetch under %s", lookup.Parent().SpanID(), fetch.Parent().SpanID())
	}
	var httpCall bool
	for _, s := range spans {
		if s.Parent().SpanID() == fetch.SpanContext().SpanID() && s.SpanKind().String() == "client" {
			httpCall = true
		}
	}
	if !httpCall {
		t.Error("no HTTP client span under upstream.fetch")
	}
	hit := spans[byName["tradergate.request"][1]]
	if hitLookup := spans[byName["cache.lookup"][1]]; hitLookup.Parent().SpanID() != hit.SpanContext().SpanID() {
		t.Error("the hit's lookup is not under its request")
	}
	attrs := map[string]string{}
	for _, a := range miss.Attributes() {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	if attrs["tradergate.request_id"] != "trace-request-1" || attrs["tradergate.route"] != "tx" || attrs["tradergate.cache"] != "MISS" {
		t.Errorf("attributes %v", attrs)
	}
	for _, s := range spans {
		for _, a := range s.Attributes() {
			if strings.Contains(a.Value.Emit(), keyAll) || strings.Contains(a.Value.Emit(), legacyKey) {
				t.Errorf("span %s carries a key in %s", s.Name(), a.Key)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || !strings.HasPrefix(seen[0], "00-4bf92f3577b34da6a3ce929d0e0e4736-") {
		t.Errorf("traceparent at the legacy host: %q", seen)
	}
}

// Tracing off (the default): no span, no traceparent to the legacy host.
func TestTracingOff(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	e := newEdge(t, withUpstream(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Header.Get("Traceparent"))
			mu.Unlock()
			next.ServeHTTP(w, r)
		})
	}))
	e.get("/v1/tx/"+e.sim.TradeTxs()[0], "Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "" {
		t.Errorf("traceparent at the legacy host with tracing off: %q", seen)
	}
}
