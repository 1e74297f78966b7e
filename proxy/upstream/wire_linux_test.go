package upstream

import (
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A connect late in a call ends with the call: it gets what is left of
// the call's time, not dial_timeout whole.
func TestLegacyConnectEndsWithTheCall(t *testing.T) {
	endsWithTheCall(t, "http://"+fullBacklog(t)+"/open-api")
}

// fullBacklog returns the address of a loopback listener that accepts no
// connection and whose accept queue (backlog 0: one connection on Linux)
// is full, so that the kernel drops the next SYN and a connect waits.
func fullBacklog(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// The queue is full once a second connect cannot complete.
	if c2, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
		c2.Close()
		t.Skip("the kernel queued a second connection on a backlog of 0")
	}
	return addr
}
