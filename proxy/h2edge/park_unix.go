//go:build unix

package h2edge

import "syscall"

const canWaitReadable = true

// readable reports whether the socket fd has something to read, an end
// or an error (the read that follows takes it): false only while a read
// would block.
func readable(fd uintptr) bool {
	var b [1]byte
	_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
	return err != syscall.EAGAIN
}
