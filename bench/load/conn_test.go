package load

import (
	"bufio"
	"errors"
	"strings"
	"testing"
)

func TestReadResponse(t *testing.T) {
	tests := []struct {
		name      string
		raw       string
		wantCache bool
		want      response
		next      string // what must remain for the next response
	}{
		{
			name: "content length",
			raw:  "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Cache: HIT\r\n\r\nhelloNEXT",
			want: response{status: 200, body: 5}, next: "NEXT",
		},
		{
			name: "x-cache when asked", wantCache: true,
			raw:  "HTTP/1.1 200 OK\r\nx-cache:  MISS \r\ncontent-length: 0\r\n\r\n",
			want: response{status: 200, cache: "MISS"},
		},
		{
			name: "chunked with trailer",
			raw:  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nabcd\r\n3\r\nefg\r\n0\r\nX-T: 1\r\n\r\nNEXT",
			want: response{status: 200, body: 7}, next: "NEXT",
		},
		{
			name: "connection close",
			raw:  "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 2\r\n\r\nno",
			want: response{status: 503, body: 2, close: true},
		},
		{
			name: "304 has no body",
			raw:  "HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\nNEXT",
			want: response{status: 304}, next: "NEXT",
		},
		{
			name: "no framing reads to the end",
			raw:  "HTTP/1.0 200 OK\r\n\r\nabc",
			want: response{status: 200, body: 3, close: true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReader(strings.NewReader(tc.raw))
			got, err := readResponse(br, tc.wantCache)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			rest, _ := br.Peek(br.Buffered())
			if string(rest) != tc.next {
				t.Fatalf("left %q for the next response, want %q", rest, tc.next)
			}
		})
	}
}

func TestReadResponseMalformed(t *testing.T) {
	for _, raw := range []string{
		"SSH-2.0-OpenSSH\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
		"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
	} {
		_, err := readResponse(bufio.NewReader(strings.NewReader(raw)), false)
		if !errors.Is(err, errFraming) {
			t.Errorf("%q: err = %v, want a framing error", raw, err)
		}
	}
}
