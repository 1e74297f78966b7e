//go:build !linux

package front

// nofileLimit: the descriptor limit is read on Linux only.
func nofileLimit() (uint64, bool) { return 0, false }
