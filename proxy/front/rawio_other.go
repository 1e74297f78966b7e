//go:build !linux

package front

import "net"

// rawIO is Linux's (rawio_linux.go); elsewhere connections read and write
// through net.Conn.
type rawIO struct{}

func newRawIO(net.Conn) *rawIO { return nil }

func (*rawIO) Read([]byte) (int, error)  { panic("unreachable") }
func (*rawIO) Write([]byte) (int, error) { panic("unreachable") }
