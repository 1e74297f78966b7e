//go:build unix

package stream

import "syscall"

// writeNoWait makes one write call of b on the socket, which Go keeps
// non-blocking, and returns how much of it went: 0 on any error, EAGAIN
// (the socket's buffer full) included.
func writeNoWait(raw syscall.RawConn, b []byte) int {
	var n int
	var werr error
	if err := raw.Write(func(fd uintptr) bool {
		n, werr = syscall.Write(int(fd), b)
		return true // once: not waiting for the socket
	}); err != nil || werr != nil || n < 0 {
		return 0
	}
	return n
}
