package fleet

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: the Conn's
// logger and the client's pools must stop on Close.
//
// go-redis logs each failed dial, and each master a sentinel names, on its
// own process-wide logger; the tests cause both on purpose, so they are
// filtered here.
func TestMain(m *testing.M) {
	redis.SetLogger(logging.NewBlacklistLogger([]string{"failed to dial", "sentinel: "}))
	goleak.VerifyTestMain(m)
}
