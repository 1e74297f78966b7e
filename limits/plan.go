// Package limits enforces per-key request allowances (docs/CONTRACT.md "Limits") and the
// caps that shield the legacy host.
package limits

import (
	"time"

	"tradergate/cache/configerr"
)

// Plan is a request allowance per fixed window (docs/CONTRACT.md "Limits": allowances
// vary by plan; once spent, every request of the key is refused until the
// window resets). Quota and window are not shown by the spec, so they are
// configuration.
type Plan struct {
	// Requests allowed per window. Required, at least 1.
	Requests int64 `yaml:"requests"`
	// Window is the length of the fixed window. Required, at least 1s.
	Window time.Duration `yaml:"window"`
}

// Validate reports the first problem of the plan, naming the field.
func (p Plan) Validate() error {
	var errs configerr.List
	if p.Requests < 1 {
		errs.Add("requests", "must be at least 1, got %d", p.Requests)
	}
	switch {
	case p.Window < time.Second:
		errs.Add("window", "must be at least 1s, got %v", p.Window)
	case p.Window%time.Second != 0:
		// X-RateLimit-Reset and Retry-After are whole seconds.
		errs.Add("window", "must be whole seconds, got %v", p.Window)
	}
	return errs.Err()
}
