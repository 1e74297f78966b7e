package proxy_test

import (
	"strings"
	"testing"
	"time"

	"tradergate/internal/testkit"
	"tradergate/proxy/config"
)

// Reload warns about restart-only settings by comparing with what runs: a
// changed listen address warns, and goes on warning while it is not
// applied; put back, it warns nothing.
func TestReloadWarnsAgainstWhatRuns(t *testing.T) {
	var logs testkit.LogBuffer
	e := newEdge(t, func(s *edgeSetup) { s.logger = logs.Logger() })
	reload := func(listen string) int {
		t.Helper()
		before := logs.Count("take effect only on restart")
		cfg := *e.cfg
		cfg.Server.Listen = listen
		if err := e.srv.Reload(&cfg); err != nil {
			t.Fatal(err)
		}
		return logs.Count("take effect only on restart") - before
	}
	running := e.cfg.Server.Listen
	if n := reload("127.0.0.1:1"); n != 1 {
		t.Errorf("a changed listen: %d warnings, want 1", n)
	}
	if n := reload("127.0.0.1:1"); n != 1 {
		t.Errorf("the same change, still not applied: %d warnings, want 1", n)
	}
	if n := reload(running); n != 0 {
		t.Errorf("listen put back to what runs: %d warnings, want none", n)
	}
}

// A reload that changes a section fixed at start names it in a warning and
// counts as restart_needed; the reloadable parts still take effect. A
// reload that changes only reloadable parts counts as applied.
func TestReloadNamesSectionsThatNeedARestart(t *testing.T) {
	tests := []struct {
		name, want string
		edit       func(c *config.Config)
	}{
		{"redis", "redis.addrs", func(c *config.Config) { c.Redis.Addrs = []string{"127.0.0.1:1"} }},
		{"tracing", "tracing.sampling_ratio", func(c *config.Config) { c.Tracing.SamplingRatio = 0.5 }},
		{"orderbook", "orderbook.max_events", func(c *config.Config) { c.OrderBook.MaxEvents = 7 }},
		{"upstream", "upstream.timeout", func(c *config.Config) { c.Upstream.Timeout += time.Second }},
		{"cache", "cache.max_bytes", func(c *config.Config) { c.Cache.MaxBytes *= 2 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs testkit.LogBuffer
			e := newEdge(t, func(s *edgeSetup) { s.logger = logs.Logger() })
			cfg := *e.cfg
			tt.edit(&cfg)
			cfg.Keys = cfg.Keys[:1] // reloadable: applied all the same
			if err := e.srv.Reload(&cfg); err != nil {
				t.Fatal(err)
			}
			warned := false
			for line := range strings.SplitSeq(logs.String(), "\n") {
				if strings.Contains(line, "take effect only on restart") {
					warned = strings.Contains(line, tt.want)
					if !warned {
						t.Errorf("the warning does not name %s: %s", tt.want, line)
					}
				}
			}
			if !warned {
				t.Errorf("no warning naming %s; log:\n%s", tt.want, logs.String())
			}
			if got := reloadsCounted(t, e, "restart_needed"); got != 1 {
				t.Errorf("restart_needed reloads = %v, want 1", got)
			}
			if got := reloadsCounted(t, e, "applied"); got != 0 {
				t.Errorf("applied reloads = %v, want 0", got)
			}
			if resp, _ := e.do("GET", "/v1/tx/"+e.sim.TradeTxs()[0], "Authorization", "Bearer "+keyTxOnly); resp.StatusCode != 401 {
				t.Errorf("a key the reload dropped: %d, want 401", resp.StatusCode)
			}
		})
	}
	t.Run("only reloadable", func(t *testing.T) {
		var logs testkit.LogBuffer
		e := newEdge(t, func(s *edgeSetup) { s.logger = logs.Logger() })
		cfg := *e.cfg
		cfg.Keys = cfg.Keys[:1]
		if err := e.srv.Reload(&cfg); err != nil {
			t.Fatal(err)
		}
		if n := logs.Count("take effect only on restart"); n != 0 {
			t.Errorf("%d restart warnings for a reloadable change; log:\n%s", n, logs.String())
		}
		if got := reloadsCounted(t, e, "applied"); got != 1 {
			t.Errorf("applied reloads = %v, want 1", got)
		}
		if got := reloadsCounted(t, e, "restart_needed"); got != 0 {
			t.Errorf("restart_needed reloads = %v, want 0", got)
		}
	})
}

// reloadsCounted is tradergate_config_reloads_total{result}.
func reloadsCounted(t *testing.T, e *edge, result string) float64 {
	t.Helper()
	mfs, err := e.srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tradergate_config_reloads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no tradergate_config_reloads_total{result=%q}", result)
	return 0
}
