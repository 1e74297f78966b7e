package upstream

import (
	"testing"

	"go.uber.org/goleak"

	"tradergate/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.FasthttpGoroutines...) }
