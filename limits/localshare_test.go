package limits

import (
	"errors"
	"testing"
	"time"

	"tradergate/internal/testkit"
	"tradergate/internal/testkit/redistest"
)

// Quotas degrade, not vanish: with Redis out and on_store_error: allow,
// each replica allows a key its share of the allowance, ceil(limit / fleet
// size), and refuses the rest as deny does; once Redis answers, counting is Redis's again.
func TestLocalShareWhileRedisIsOut(t *testing.T) {
	srv := redistest.Start(t)
	plan := Plan{Requests: 10, Window: time.Minute}
	clk := testkit.NewClock(t0)
	addrs := []string{srv.Addr()}
	for _, tc := range []struct {
		name  string
		fleet int
		share int
	}{
		{"fleet_size 3", 3, 4},
		{"counted in Redis: this replica alone", 0, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimiter(t, Config{OnStoreError: OnStoreErrorAllow, FleetSize: tc.fleet}, shared(t, addrs, 50*time.Millisecond, Options{Now: clk.Now}))
			b := NewBucket("key:share-" + tc.name)
			if d := l.TakeAt(bg, clk.Now(), b, plan, "free"); d.StoreErr != nil || !d.Allowed {
				t.Fatalf("before the outage: %+v", d)
			}
			srv.Stop()
			t.Cleanup(srv.Restart)
			allowed := 0
			for i := range 3 * plan.Requests {
				d := l.TakeAt(bg, clk.Now(), b, plan, "free")
				switch {
				case d.Allowed && errors.Is(d.StoreErr, errStoreUnavailable):
					allowed++
				case !d.Allowed && errors.Is(d.StoreErr, errStoreUnavailable):
					// past the share: refused as deny refuses
				default:
					t.Fatalf("take %d during the outage: %+v", i, d)
				}
			}
			if allowed != tc.share {
				t.Errorf("allowed %d during the outage, want the local share %d", allowed, tc.share)
			}
			srv.Restart()
			testkit.Eventually(t, "Redis counts again", func() bool {
				return l.TakeAt(bg, clk.Now(), b, plan, "free").StoreErr == nil
			})
		})
	}
}
