package openapitest_test

import (
	"testing"

	"go.uber.org/goleak"

	"tradergate/internal/testkit"
)

// TestMain fails the run if a test leaves a goroutine behind: the edge,
// the simulated legacy host and the validator must all stop (but
// fasthttp's own, testkit.FasthttpGoroutines).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.FasthttpGoroutines...) }
