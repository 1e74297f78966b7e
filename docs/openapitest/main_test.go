package openapitest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: the edge,
// the simulated legacy host and the validator must all stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
