package proxy

import (
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"

	"tradergate/proxy/h2edge"
)

// readHeaders reads what the steps use from the raw header block, as
// fasthttp's Peek would (the first of a repeated field, values without the
// white space around them, names in any case), counts Authorization
// fields, keeps every X-Forwarded-For line, and refuses the framing a
// proxy in front could read otherwise.
func TestReadHeaders(t *testing.T) {
	raw := "Host: edge.test\r\n" +
		"authorization:   Bearer k1 \t\r\n" +
		"ACCEPT-ENCODING: gzip, br\r\n" +
		"Accept-Encoding: identity\r\n" +
		"If-None-Match: \"abc\"\r\n" +
		"X-Forwarded-For: 192.0.2.1\r\n" +
		"X-Request-Id:req-00000001\r\n" +
		"x-forwarded-for: 198.51.100.2, 10.0.0.1\r\n" +
		"Traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n" +
		"Tracestate: a=1\r\n" +
		"Authorization: Bearer k2\r\n" +
		"X-Unknown-Field: whatever\r\n" +
		"\r\n"
	for _, traced := range []bool{false, true} {
		var x request
		if readHeaders(&x, []byte(raw), traced) {
			t.Fatalf("traced=%v: a well-formed block refused", traced)
		}
		if x.authorization != "Bearer k1" || x.authorizations != 2 {
			t.Errorf("Authorization %q x%d, want the first of 2", x.authorization, x.authorizations)
		}
		if x.acceptEncoding != "gzip, br" || x.ifNoneMatch != `"abc"` || x.incomingID != "req-00000001" {
			t.Errorf("Accept-Encoding %q, If-None-Match %q, X-Request-Id %q", x.acceptEncoding, x.ifNoneMatch, x.incomingID)
		}
		if want := []string{"192.0.2.1", "198.51.100.2, 10.0.0.1"}; !slices.Equal(x.forwardedFor, want) {
			t.Errorf("X-Forwarded-For %q, want %q", x.forwardedFor, want)
		}
		// The trace context is read only when tracing is on.
		if got := x.traceparent != "" && x.tracestate == "a=1"; got != traced {
			t.Errorf("traced=%v: traceparent %q tracestate %q", traced, x.traceparent, x.tracestate)
		}
	}

	// A name that differs from a known one in a non-letter byte is not it:
	// case folding applies to letters only.
	var x request
	if readHeaders(&x, []byte("X\rRequest-Id: nope\r\n\r\n"), false) || x.incomingID != "" {
		t.Errorf("a lookalike name read as X-Request-Id: %q", x.incomingID)
	}

	for name, block := range map[string]string{
		"bare LF":                 "Host: a\nAccept: */*\r\n\r\n",
		"obs-fold":                "Host: a\r\nX-A: b\r\n  c\r\n\r\n",
		"space before the colon":  "Host : a\r\n\r\n",
		"tab before the colon":    "Host\t: a\r\n\r\n",
		"no colon":                "Host a\r\n\r\n",
		"empty name":              ": a\r\n\r\n",
		"Content-Length with TE":  "Host: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
		"TE with Content-Length":  "Host: a\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n",
		"bare LF on the last one": "Host: a\r\nX-A: b\n\r\n",
	} {
		var x request
		if !readHeaders(&x, []byte(block), false) {
			t.Errorf("%s: not refused", name)
		}
	}
	// A block fasthttp did not keep (a request built in the process): no
	// fields, nothing refused.
	if readHeaders(&x, nil, true) {
		t.Error("an empty block refused")
	}
}

// The HTTP/2 front keeps the same fields by the same rules as the
// HTTP/1.1 one (exchange.readField): the same request, read by both,
// leaves the same values.
func TestReadH2MatchesReadHeaders(t *testing.T) {
	fields := [][2]string{
		{"host", "edge.test"}, {"authorization", "Bearer k1"},
		{"accept-encoding", "gzip, br"}, {"accept-encoding", "identity"},
		{"if-none-match", `"abc"`}, {"x-forwarded-for", "192.0.2.1"},
		{"x-request-id", "req-00000001"}, {"x-request-id", "req-00000002"},
		{"x-forwarded-for", "198.51.100.2, 10.0.0.1"},
		{"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		{"tracestate", "a=1"}, {"authorization", "Bearer k2"}, {"x-unknown-field", "whatever"},
	}
	var raw strings.Builder
	st := &h2edge.Stream{Method: "GET", Path: "/v1/x"}
	for _, f := range fields {
		raw.WriteString(f[0] + ": " + f[1] + "\r\n")
		st.Fields = append(st.Fields, hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	raw.WriteString("\r\n")
	s := &Server{cfg: &Config{}}
	s.cfg.Server.MaxHeaderBytes = 1 << 20
	var h1, h2 exchange
	if readHeaders(&h1.request, []byte(raw.String()), false) {
		t.Fatal("a well-formed block refused")
	}
	s.readH2(&h2, st)
	if h2.refused != 0 {
		t.Fatalf("refused: %v", h2.refused)
	}
	type read struct {
		auth    string
		auths   int
		ae, inm string
		id      string
		xff     string
		tp, ts  string
	}
	of := func(x *exchange) read {
		return read{x.authorization, int(x.authorizations), x.acceptEncoding, x.ifNoneMatch, x.incomingID,
			strings.Join(x.forwardedFor, "|"), x.traceparent, x.tracestate}
	}
	if a, b := of(&h1), of(&h2); a != b || a.auths != 2 || a.id != "req-00000001" || a.tp != "" {
		t.Errorf("HTTP/1.1 read %+v, HTTP/2 read %+v", a, b)
	}
}
