package front

import (
	"net"
	"strings"
	"testing"

	"tradergate/internal/testkit"
)

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

// A connection keeps the request line last read, across reads and
// requests, for errorFast.
func TestLFScanRequestLine(t *testing.T) {
	long := "/v1/tx/0xab?q=" + strings.Repeat("a", requestLineMax)
	for _, tc := range []struct {
		name           string
		reads          []string
		method, target string
		whole, ok      bool
	}{
		{"headers too large", []string{"GET /open-api/v1/tx/0xab HTTP/1.1\r\nHost: x\r\nX-Pad: aaa"}, "GET", "/open-api/v1/tx/0xab", true, true},
		{"split across reads", []string{"GET /open-api/v1/", "tx/0xab HTTP/1.1\r", "\nHost: x\r\n"}, "GET", "/open-api/v1/tx/0xab", true, true},
		{"line not ended", []string{"GET /v1/tx/0xab?q=aaaa"}, "GET", "/v1/tx/0xab?q=aaaa", false, true},
		{"line longer than kept", []string{"GET " + long + " HTTP/1.1\r\n"}, "GET", long[:requestLineMax-4], false, true},
		{"the second request", []string{"GET /v1/a HTTP/1.1\r\nHost: x\r\n\r\n", "\r\nGET /open-api/v1/b HTTP/1.1\r\nX: y"}, "GET", "/open-api/v1/b", true, true},
		{"between requests", []string{"GET /v1/a HTTP/1.1\r\nHost: x\r\n\r\n"}, "", "", false, false},
		{"nothing read", nil, "", "", false, false},
		{"not a request", []string{"not-a-request\r\n"}, "", "", false, false},
		{"asterisk", []string{"OPTIONS * HTTP/1.1\r\n"}, "", "", false, false},
	} {
		var s lfScan
		for _, r := range tc.reads {
			s.read([]byte(r), nil)
		}
		method, target, whole, ok := s.requestLine()
		if method != tc.method || target != tc.target || whole != tc.whole || ok != tc.ok {
			t.Errorf("%s: requestLine() = %q, %q, %v, %v; want %q, %q, %v, %v", tc.name, method, target, whole, ok, tc.method, tc.target, tc.whole, tc.ok)
		}
	}
}

// frontPair is testkit.TCPPair with the server's end a front connection.
func frontPair(t *testing.T) (*frontConn, net.Conn) {
	t.Helper()
	client, server := testkit.TCPPair(t)
	return &frontConn{TCPConn: server.(*net.TCPConn)}, client
}
