//go:build !unix

package h2edge

const canWaitReadable = false

func readable(uintptr) bool { return true }
