package limits

import (
	"net/netip"
	"strings"
)

// ClientIPFrom is the address requests without a valid key are limited
// by, from the connection's peer address and the X-Forwarded-For field
// values, in order. It is the peer, unless the peer is a trusted proxy
// (Config.TrustedProxies): then X-Forwarded-For is read from the right,
// skipping trusted hops, and the first untrusted address is the client.
// Entries left of it were written by the client and may be forged, so
// they are never read. Several X-Forwarded-For fields count as one list in
// order (RFC 9110 section 5.3).
//
// If an entry cannot be parsed before an untrusted one is found, the walk
// stops at the last address vouched for (a trusted hop, or the peer): a
// client cannot choose its bucket by sending garbage. If every entry is
// trusted, the left-most is returned. IPv4-mapped IPv6 addresses are
// unmapped. The zero Addr means the peer address could not be read (for
// example a Unix socket); IPBucket gives it a bucket of its own.
func (l *Limiter) ClientIPFrom(peer netip.Addr, fields []string) netip.Addr {
	peer = normalizeAddr(peer)
	if !peer.IsValid() || !l.isTrusted(peer) {
		return peer
	}
	client := peer
	for i := len(fields) - 1; i >= 0; i-- {
		list := fields[i]
		for list != "" {
			var entry string
			if j := strings.LastIndexByte(list, ','); j >= 0 {
				list, entry = list[:j], list[j+1:]
			} else {
				list, entry = "", list
			}
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue // empty list elements are allowed and ignored
			}
			a, ok := parseForwarded(entry)
			if !ok {
				return client
			}
			client = a
			if !l.isTrusted(a) {
				return a
			}
		}
	}
	return client
}

func (l *Limiter) isTrusted(a netip.Addr) bool {
	for _, p := range l.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseForwarded reads one X-Forwarded-For entry. Besides a bare address it
// accepts the forms some proxies write: with a port ("192.0.2.1:443",
// "[2001:db8::1]:443") and bracketed IPv6 ("[2001:db8::1]").
func parseForwarded(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return normalizeAddr(a), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normalizeAddr(ap.Addr()), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Is6() {
			return normalizeAddr(a), true
		}
	}
	return netip.Addr{}, false
}

// normalizeAddr makes one client one address: ::ffff:192.0.2.1 is
// 192.0.2.1, and a link-local zone names an interface, not a client.
func normalizeAddr(a netip.Addr) netip.Addr {
	return a.Unmap().WithZone("")
}

// ipv6BucketBits is the IPv6 prefix one bucket covers. A single host
// commonly holds a whole /64 and can change address within it at will, so
// limiting per /128 would not throttle key guessing at all.
const ipv6BucketBits = 64

// IPBucket is the TakeAt bucket of a client address: "ip:192.0.2.1" for IPv4,
// "ip:2001:db8:1:2::/64" for IPv6 (the /64 a host typically owns), and
// "ip:unknown" for the zero Addr.
func IPBucket(a netip.Addr) string {
	a = normalizeAddr(a)
	switch {
	case !a.IsValid():
		return "ip:unknown"
	case a.Is4():
		return "ip:" + a.String()
	default:
		return "ip:" + netip.PrefixFrom(a, ipv6BucketBits).Masked().String()
	}
}
