package load

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"tradergate/bench/cpustat"
)

// counters is one reading of everything a row compares across the window:
// the two CPUs, the server's process group and the upstream's counter.
type counters struct {
	server, load cpustat.CPUTimes
	cpuErr       error
	proc         uint64
	procErr      error
	upstream     int64
	upErr        error
}

// probe takes readings for one spec.
type probe struct {
	spec   *Spec
	client *http.Client
}

func newProbe(s *Spec) *probe {
	return &probe{spec: s, client: &http.Client{Timeout: 2 * time.Second}}
}

func (p *probe) read(ctx context.Context) counters {
	var c counters
	s := p.spec
	if s.ServerCPU >= 0 {
		c.server, c.cpuErr = cpustat.ReadStat(s.ServerCPU)
	}
	if c.cpuErr == nil && s.LoadCPU >= 0 {
		c.load, c.cpuErr = cpustat.ReadStat(s.LoadCPU)
	}
	if s.ServerPGID > 0 {
		c.proc, c.procErr = cpustat.GroupJiffies(s.ServerPGID)
	}
	if s.StatsURL != "" {
		c.upstream, c.upErr = p.upstream(ctx)
	}
	return c
}

// upstream reads the upstream's request counter (the simulated legacy
// host's /__stats).
func (p *probe) upstream(ctx context.Context) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.spec.StatsURL, nil)
	if err != nil {
		return 0, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("stats: status %d", resp.StatusCode)
	}
	var st struct {
		Requests *int64 `json:"requests"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || st.Requests == nil {
		return 0, fmt.Errorf("stats: no requests count (%v)", err)
	}
	return *st.Requests, nil
}

// fill sets the counter deltas of res from readings before and after.
func (p *probe) fill(res *Result, before, after counters) {
	s := p.spec
	if s.ServerCPU >= 0 {
		if err := firstErr(before.cpuErr, after.cpuErr); err != nil {
			res.Problems = append(res.Problems, "cpu: "+err.Error())
		} else {
			res.ServerCPU, res.LoadCPU, res.CPUMeasured = after.server.Sub(before.server), after.load.Sub(before.load), true
		}
	}
	if s.ServerPGID > 0 {
		if err := firstErr(before.procErr, after.procErr); err != nil {
			res.Problems = append(res.Problems, "process cpu: "+err.Error())
		} else {
			res.ServerProcJiffies, res.ProcMeasured = after.proc-before.proc, true
		}
	}
	if s.StatsURL != "" {
		if err := firstErr(before.upErr, after.upErr); err != nil {
			res.Problems = append(res.Problems, "upstream: "+err.Error())
		} else {
			res.Upstream, res.UpstreamMeasured = after.upstream-before.upstream, true
		}
	}
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
