//go:build unix

package stream

import (
	"syscall"
	"unsafe"
)

// writeNoWait makes one write call of b on the socket, which Go keeps
// non-blocking, and returns how much of it went: 0 on any error, EAGAIN
// (the socket's buffer full) included. The call is raw (RawSyscall, as
// the fronts' reads and writes are, proxy/front/rawio_linux.go): a write
// on a non-blocking socket never waits in the kernel, so the scheduler
// need not be told, and a hub's hand-off of one event to thousands of
// subscribers does not wake the runtime's monitor thread on each.
func writeNoWait(raw syscall.RawConn, b []byte) int {
	if len(b) == 0 {
		return 0
	}
	var n uintptr
	var errno syscall.Errno
	if err := raw.Write(func(fd uintptr) bool {
		for {
			n, _, errno = syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
			if errno != syscall.EINTR {
				return true // once: not waiting for the socket
			}
		}
	}); err != nil || errno != 0 {
		return 0
	}
	return int(n)
}
