package proxy_test

import (
	"testing"

	"tradergate/internal/testkit"
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
