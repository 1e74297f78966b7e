//go:build !linux

package main

import (
	"errors"
	"time"
)

// spinOn: threads are pinned on Linux only.
func spinOn(cpu, nice int, d time.Duration) (time.Duration, int, time.Duration, error) {
	return 0, 0, 0, errors.New("threads are pinned on Linux only")
}
