package openapitest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: the edge,
// the simulated legacy host and the validator must all stop. fasthttp's
// own are let be (outside_test.go serves the edge through it): the Date
// header's once-a-second updater, started once per process and never
// stopped, and a stopped server's worker-pool cleaner, which returns when
// its idle sleep ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"))
}
