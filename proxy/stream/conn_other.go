//go:build !unix

package stream

import "syscall"

// writeNoWait writes nothing where the socket's write call is not
// syscall.Write's: the writing goroutine writes everything.
func writeNoWait(syscall.RawConn, []byte) int { return 0 }
