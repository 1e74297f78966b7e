package deploy

import (
	"testing"

	"go.uber.org/goleak"

	"tradergate/internal/testkit"
)

// Every test closes what it starts, but for fasthttp's own goroutines
// (helm_test.go runs an edge; testkit.FasthttpGoroutines says which).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.FasthttpGoroutines...) }
