package fleet

import (
	"net"
	"time"
)

// deadConn stands for a dial that failed: every read and write returns the
// dial's error, so the command that needed the connection fails with it,
// and the breaker counts it.
//
// Why not return the error from the dial: go-redis's pool keeps its own
// dial breaker (internal/pool/pool.go, dialConn). After PoolSize failed
// dials it stops dialling, answers every command with the last dial error,
// and only a goroutine re-dialling once a second (tryDial) resets it; its
// count of failed dials is reset by nothing else, so it carries over from
// one outage to the next. Behind this package's breaker that second
// breaker only delays recovery, by up to a second after each outage and
// far longer when our breaker refuses tryDial's dials. A dial that
// "succeeds" with a dead connection never arms it: the pool removes the
// connection when its first use fails, and the decision when to dial again
// stays with this package's breaker.
type deadConn struct{ err error }

func (c deadConn) Read([]byte) (int, error)       { return 0, c.err }
func (c deadConn) Write([]byte) (int, error)      { return 0, c.err }
func (deadConn) Close() error                     { return nil }
func (deadConn) LocalAddr() net.Addr              { return deadAddr{} }
func (deadConn) RemoteAddr() net.Addr             { return deadAddr{} }
func (deadConn) SetDeadline(time.Time) error      { return nil }
func (deadConn) SetReadDeadline(time.Time) error  { return nil }
func (deadConn) SetWriteDeadline(time.Time) error { return nil }

type deadAddr struct{}

func (deadAddr) Network() string { return "tcp" }
func (deadAddr) String() string  { return "unconnected" }
