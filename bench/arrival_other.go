//go:build !linux

package main

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// enableRxTimestamps: the kernel's receive timestamps are read on Linux
// only.
func enableRxTimestamps(net.Conn) (syscall.RawConn, []byte, error) {
	return nil, nil, errors.New("receive timestamps are read on Linux only")
}

// Read keeps the time the read returned.
func (c *stampedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.at, c.kernel = time.Now().UnixNano(), false
	return n, err
}
