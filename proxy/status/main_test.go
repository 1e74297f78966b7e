package status

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: the browser's,
// the Redis clients' and Board.Run's must all stop. go-redis logs each
// failed dial on its process-wide logger; a test stops Redis on purpose.
func TestMain(m *testing.M) {
	redis.SetLogger(logging.NewBlacklistLogger([]string{"failed to dial"}))
	goleak.VerifyTestMain(m)
}
