package proxy

import (
	"time"
	"tradergate/proxy/config"
)

// BackdateACMEOrders makes mode acme ask its CA for certificates that
// started d ago, so that a test holds one already due for renewal.
func BackdateACMEOrders(c *config.Config, d time.Duration) { c.Server.TLS.Backdate = d }
