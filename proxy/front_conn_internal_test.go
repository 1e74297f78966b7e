package proxy

import "testing"

// A bare LF is found wherever the reads split the bytes, and a CRLF split
// between two reads is not one.
func TestLFScanAcrossReads(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reads []string
		bare  bool
	}{
		{"CRLF lines", []string{"GET / HTTP/1.1\r\nHost: x\r\n\r\n"}, false},
		{"CRLF split", []string{"GET / HTTP/1.1\r", "\nHost: x\r\n\r", "\n"}, false},
		{"bare LF", []string{"GET / HTTP/1.1\nHost: x\n\n"}, true},
		{"bare LF first in a read", []string{"GET / HTTP/1.1\r\nHost: x", "\n\r\n"}, true},
		{"bare LF late", []string{"GET / HTTP/1.1\r\n", "Host: x\r\nX-A: b\n"}, true},
		{"LF alone", []string{"\n"}, true},
		{"no LF", []string{"GET / HTTP/1.1"}, false},
	} {
		var s lfScan
		bare := false
		for _, r := range tc.reads {
			if _, err := s.read([]byte(r), nil); err == errBareLF {
				bare = true
			}
		}
		if bare != tc.bare {
			t.Errorf("%s: bare LF found %v, want %v", tc.name, bare, tc.bare)
		}
	}
}

// requestLineOf reads the request line fasthttp quotes in its errors.
func TestRequestLineOf(t *testing.T) {
	for _, tc := range []struct {
		msg, method, target string
		whole, ok           bool
	}{
		{`error when reading request headers: small read buffer: buffer size=16384, contents: "GET /open-api/v1/tx/0xab HTTP/1.1\r\nHost: x\r\nX-Pad: aaa"..."aaa"`, "GET", "/open-api/v1/tx/0xab", true, true},
		{`error when reading request headers: small read buffer: buffer size=16384, contents: "GET /v1/tx/0xab?q=aaaa"..."aaaa"`, "GET", "/v1/tx/0xab?q=aaaa", false, true},
		{`error when reading request headers: small read buffer: buffer size=16384`, "", "", false, false},
		{`contents: "not a request"`, "", "", false, false},
		{`contents: "GET * HTTP/1.1\r\n"`, "", "", false, false},
	} {
		method, target, whole, ok := requestLineOf(errString(tc.msg))
		if method != tc.method || target != tc.target || whole != tc.whole || ok != tc.ok {
			t.Errorf("requestLineOf(%q) = %q, %q, %v, %v", tc.msg, method, target, whole, ok)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }
