package native_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: the
// shadow workers and the native client's connections must all stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
