package main

import (
	"testing"

	"go.uber.org/goleak"

	"tradergate/internal/testkit"
)

// The fanout test serves an edge in this process: fasthttp's own
// goroutines may outlive it (testkit.FasthttpGoroutines says why).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.FasthttpGoroutines...) }
