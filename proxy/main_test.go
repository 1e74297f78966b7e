package proxy_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"tradergate/internal/testkit"
)

// quietRedis drops go-redis's process-wide dial-failure lines: the tests
// stop Redis on purpose.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{})
	// Every test closes what it starts: no goroutine outlives the package
	// (but certmagic's package-level ones, pebble_test.go, and fasthttp's).
	goleak.VerifyTestMain(m, append(append(certmagicGoroutines, testkit.FasthttpGoroutines...), testkit.ToxiproxyGoroutines...)...)
}
