package limits

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestClientIP(t *testing.T) {
	l := newLimiter(t, Config{TrustedProxies: []string{"10.0.0.0/8", "192.0.2.10", "2001:db8:ffff::/48"}}, Options{})
	tests := []struct {
		name   string
		remote string
		xff    []string
		want   string // "" = the zero Addr
	}{
		{name: "direct peer", remote: "203.0.113.7:5555", want: "203.0.113.7"},
		{name: "direct IPv6 peer", remote: "[2001:db8::7]:5555", want: "2001:db8::7"},
		{name: "mapped IPv4 peer is unmapped", remote: "[::ffff:203.0.113.7]:5555", want: "203.0.113.7"},
		{name: "untrusted peer: XFF ignored", remote: "203.0.113.7:5555", xff: []string{"198.51.100.1"}, want: "203.0.113.7"},
		{name: "trusted peer, one hop", remote: "10.1.2.3:80", xff: []string{"198.51.100.1"}, want: "198.51.100.1"},
		{name: "trusted peer without XFF", remote: "10.1.2.3:80", want: "10.1.2.3"},
		{
			name:   "client-written entries left of the first untrusted are ignored",
			remote: "10.1.2.3:80",
			xff:    []string{"1.1.1.1, 198.51.100.1, 10.9.9.9"},
			want:   "198.51.100.1",
		},
		{
			name:   "several XFF fields are one list in order",
			remote: "10.1.2.3:80",
			xff:    []string{"6.6.6.6, 198.51.100.1", "192.0.2.10", "10.0.0.1"},
			want:   "198.51.100.1",
		},
		{name: "spaces and empty elements", remote: "10.1.2.3:80", xff: []string{" ,198.51.100.1 , , 10.0.0.1,"}, want: "198.51.100.1"},
		{name: "garbage right-most: the peer", remote: "10.1.2.3:80", xff: []string{"198.51.100.1, not-an-ip"}, want: "10.1.2.3"},
		{name: "garbage behind a trusted hop: that hop", remote: "10.1.2.3:80", xff: []string{"unknown, 10.0.0.7"}, want: "10.0.0.7"},
		{name: "garbage left of the client is never read", remote: "10.1.2.3:80", xff: []string{"<script>, 198.51.100.1"}, want: "198.51.100.1"},
		{name: "all hops trusted: left-most", remote: "10.1.2.3:80", xff: []string{"10.0.0.2, 10.0.0.1"}, want: "10.0.0.2"},
		{name: "IPv6 entries", remote: "[2001:db8:ffff::1]:443", xff: []string{"2001:db8:1::5, 2001:db8:ffff::2"}, want: "2001:db8:1::5"},
		{name: "bracketed IPv6 with port", remote: "10.1.2.3:80", xff: []string{"[2001:db8:1::5]:4711"}, want: "2001:db8:1::5"},
		{name: "bracketed IPv6", remote: "10.1.2.3:80", xff: []string{"[2001:db8:1::5]"}, want: "2001:db8:1::5"},
		{name: "IPv4 with port", remote: "10.1.2.3:80", xff: []string{"198.51.100.1:1234"}, want: "198.51.100.1"},
		{name: "mapped IPv4 in XFF", remote: "10.1.2.3:80", xff: []string{"::ffff:198.51.100.1"}, want: "198.51.100.1"},
		{name: "mapped trusted peer", remote: "[::ffff:10.1.2.3]:80", xff: []string{"198.51.100.1"}, want: "198.51.100.1"},
		{name: "zone dropped", remote: "10.1.2.3:80", xff: []string{"fe80::1%eth0"}, want: "fe80::1"},
		{name: "unreadable peer", remote: "@", want: ""},
		{name: "bare IP peer", remote: "203.0.113.7", want: "203.0.113.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := clientIP(l, newRequest(tt.remote, tt.xff...))
			if tt.want == "" {
				if got.IsValid() {
					t.Fatalf("ClientIP = %v, want the zero Addr", got)
				}
				return
			}
			if got != netip.MustParseAddr(tt.want) {
				t.Fatalf("ClientIP = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestClientIPWithoutTrustedProxies(t *testing.T) {
	l := newLimiter(t, Config{}, Options{})
	if got := clientIP(l, newRequest("127.0.0.1:1", "198.51.100.1")); got != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("ClientIP = %v: XFF believed with no trusted proxy", got)
	}
}

func TestIPBucket(t *testing.T) {
	for in, want := range map[string]string{
		"198.51.100.1":         "ip:198.51.100.1",
		"::ffff:198.51.100.1":  "ip:198.51.100.1",
		"2001:db8:1:2:3:4:5:6": "ip:2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1": "ip:2001:db8:1:2::/64",
		"2001:db8:1:3::1":      "ip:2001:db8:1:3::/64",
		"fe80::1%eth0":         "ip:fe80::/64",
	} {
		if got := IPBucket(netip.MustParseAddr(in)); got != want {
			t.Errorf("IPBucket(%s) = %q, want %q", in, got, want)
		}
	}
	if got := IPBucket(netip.Addr{}); got != "ip:unknown" {
		t.Errorf("IPBucket(zero) = %q", got)
	}
}

func newRequest(remote string, xff ...string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "http://edge/v1/tx/0x00", nil)
	r.RemoteAddr = remote
	for _, v := range xff {
		r.Header.Add("X-Forwarded-For", v)
	}
	return r
}
