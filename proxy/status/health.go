package status

import (
	"fmt"
	"math"
	"strings"
)

// Health is the page's verdict on the replica: green when it shields the
// legacy host as it should, amber when something needs a look, red when
// clients are failed or about to be.
type health struct {
	// State is green, amber or red.
	State string `json:"state"`
	// Reasons say what made the state amber or red; empty when green.
	Reasons []string `json:"reasons"`
}

// Health states.
const (
	green = "green"
	amber = "amber"
	red   = "red"
)

// Thresholds of the verdict. They are for a glance, not for alerting: the
// alerts are the Prometheus rules' business.
const (
	errorRatioAmber   = 0.01
	errorRatioRed     = 0.05
	certDaysAmber     = 21
	certDaysRed       = 7
	inFlightAmberFrac = 0.9
)

// Assess fills what follows from the rest of s: the uptime, each
// certificate's days left, the Totals taken from the sections (in-flight,
// cache size, open breakers), and the Health verdict.
func assess(s *Snapshot) {
	derive(s)
	h := verdict{state: green}
	if !s.Ready {
		h.add(red, "not ready: not serving, or draining")
	}
	var open, half []string
	for _, r := range s.Routes {
		switch r.Breaker {
		case breakerOpen:
			open = append(open, r.Name)
		case breakerHalfOpen:
			half = append(half, r.Name)
		}
	}
	if len(open) > 0 {
		h.add(red, "breaker open: "+strings.Join(open, ", "))
	}
	if len(half) > 0 {
		h.add(amber, "breaker half-open: "+strings.Join(half, ", "))
	}
	if er := s.Totals.ErrorRatio(); er >= errorRatioRed {
		h.add(red, fmt.Sprintf("%s of answers are 5xx", pct(er)))
	} else if er >= errorRatioAmber {
		h.add(amber, fmt.Sprintf("%s of answers are 5xx", pct(er)))
	}
	if !s.Config.ReloadOK {
		h.add(amber, "last configuration reload failed")
	}
	for _, c := range s.TLS {
		name := strings.Join(c.Names, ", ")
		switch {
		case c.DaysLeft < 0:
			h.add(red, "certificate expired: "+name)
		case c.DaysLeft < certDaysRed:
			h.add(red, fmt.Sprintf("certificate expires in %d days: %s", c.DaysLeft, name))
		case c.DaysLeft < certDaysAmber:
			h.add(amber, fmt.Sprintf("certificate expires in %d days: %s", c.DaysLeft, name))
		}
	}
	switch s.Limits.Store {
	case StoreDown:
		h.add(red, "rate-limit store down")
	case storeDegraded:
		h.add(amber, "rate-limit store degraded: counting locally")
	}
	if s.Cache.L2.Present && s.Cache.L2.Breaker == breakerOpen {
		h.add(amber, "Redis unreachable: shared cache off")
	}
	if m := s.Upstream.MaxConcurrent; m > 0 && float64(s.Upstream.InFlight) >= inFlightAmberFrac*float64(m) {
		h.add(amber, fmt.Sprintf("upstream calls in flight near the limit (%d of %d)", s.Upstream.InFlight, m))
	}
	if s.Native != nil {
		var back []string
		for _, r := range s.Native.Routes {
			if r.RolledBack {
				back = append(back, r.Name)
			}
		}
		if len(back) > 0 {
			h.add(amber, "native rolled back to legacy: "+strings.Join(back, ", "))
		}
	}
	if s.Fleet.Error != "" {
		h.add(amber, "fleet figures unavailable")
	}
	for _, r := range s.Fleet.Replicas {
		// This replica's readiness is the first reason's, from s.Ready.
		if !r.Ready && r.ID != s.Replica {
			h.add(amber, "replica not ready: "+r.ID)
		}
	}
	s.Health = health{State: h.state, Reasons: h.reasons}
	if s.Health.Reasons == nil {
		s.Health.Reasons = []string{}
	}
}

type verdict struct {
	state   string
	reasons []string
}

func (v *verdict) add(state, reason string) {
	v.reasons = append(v.reasons, reason)
	if state == red || v.state == green {
		v.state = state
	}
}

func derive(s *Snapshot) {
	if !s.Started.IsZero() && !s.Taken.IsZero() {
		s.UptimeSeconds = s.Taken.Sub(s.Started).Seconds()
	}
	for i := range s.TLS {
		s.TLS[i].DaysLeft = int(math.Floor(s.TLS[i].NotAfter.Sub(s.Taken).Hours() / 24))
	}
	deriveTotals(s)
	// Empty lists are [] in JSON, not null, so consumers need not tell
	// the two apart.
	if s.Routes == nil {
		s.Routes = []Route{}
	}
	if s.TLS == nil {
		s.TLS = []Cert{}
	}
	if s.Limits.Refused == nil {
		s.Limits.Refused = []PlanRefusals{}
	}
	if s.Limits.TopKeys == nil {
		s.Limits.TopKeys = []KeyLoad{}
	}
	if s.Fleet.Replicas == nil {
		s.Fleet.Replicas = []replica{}
	}
	if s.Native != nil && s.Native.Routes == nil {
		s.Native.Routes = []NativeRoute{}
	}
	for i := range s.TLS {
		if s.TLS[i].Names == nil {
			s.TLS[i].Names = []string{}
		}
	}
}

// deriveTotals copies into Totals the figures the sections hold.
func deriveTotals(s *Snapshot) {
	s.Totals.UpstreamInFlight = s.Upstream.InFlight
	s.Totals.CacheEntries = s.Cache.Entries
	s.Totals.CacheBytes = s.Cache.Bytes
	s.Totals.OpenBreakers = 0
	for _, r := range s.Routes {
		if r.Breaker == breakerOpen {
			s.Totals.OpenBreakers++
		}
	}
}
