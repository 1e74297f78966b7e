//go:build !linux

package front

import "net"

// rawIO is Linux's (rawio_linux.go); elsewhere connections read and write
// through net.Conn.
type rawIO struct{}

func newRawIO(net.Conn) *rawIO { return nil }

func (*rawIO) readOr(c net.Conn, p []byte) (int, error)  { return c.Read(p) }
func (*rawIO) writeOr(c net.Conn, p []byte) (int, error) { return c.Write(p) }
