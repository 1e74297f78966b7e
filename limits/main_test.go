package limits

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: the memory
// store's cleaner, the Redis reconnect loop and the Redis client's pool
// must all stop on Close.
//
// go-redis logs each failed dial on its own process-wide logger; the
// fail-mode tests cause them on purpose, so they are filtered here.
func TestMain(m *testing.M) {
	redis.SetLogger(logging.NewBlacklistLogger([]string{"failed to dial"}))
	goleak.VerifyTestMain(m)
}
