package configerr

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// CheckListen refuses a listen address that net.Listen("tcp", addr) would
// refuse for its form, so that a file is refused when it is checked, not
// when the edge starts: not host:port, a port out of 0 to 65535 or not
// a known service name, a host that is neither an IP address nor a name.
// Whether the address can be bound on this machine (in use, not local) is
// known only by binding it. The server, admin and plain-HTTP listeners'
// sections, in three packages, all check with it.
func CheckListen(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be host:port, got %q", addr)
	}
	switch n, err := strconv.Atoi(port); {
	case port == "":
		return fmt.Errorf("has no port, got %q", addr)
	case err == nil && (n < 0 || n > 65535):
		return fmt.Errorf("port %d is out of range (0 to 65535), got %q", n, addr)
	case err != nil:
		if _, err := net.LookupPort("tcp", port); err != nil {
			return fmt.Errorf("port %q is neither a number nor a known service, got %q", port, addr)
		}
	}
	if host == "" {
		return nil
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	if !isHostName(host) {
		return fmt.Errorf("host %q is neither an IP address nor a host name", host)
	}
	return nil
}

// isHostName reports whether s has the form of a DNS name: labels of
// letters, digits and hyphens, at most 63 bytes each, 253 in all.
func isHostName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
