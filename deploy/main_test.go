package deploy

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test closes what it starts, but for fasthttp's own goroutines
// (helm_test.go runs an edge): the Date header's updater, never stopped by
// design, and a stopped server's worker-pool cleaner, which returns when
// its idle sleep ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"))
}
