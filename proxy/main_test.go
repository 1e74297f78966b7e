package proxy_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// quietRedis drops go-redis's process-wide dial-failure lines: the tests
// stop Redis on purpose.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{})
	// Every test closes what it starts: no goroutine outlives the package
	// (but certmagic's package-level ones, pebble_test.go, and fasthttp's).
	goleak.VerifyTestMain(m, append(certmagicGoroutines, fasthttpGoroutines...)...)
}

// fasthttpGoroutines are fasthttp's own: the Date header's once-a-second
// updater, started once per process and never stopped (by design), and a
// stopped server's worker-pool cleaner, which returns when its sleep of
// MaxIdleWorkerDuration ends.
var fasthttpGoroutines = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
}
