package main

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Host stalls. On a virtual machine a pinned CPU is not always the
// server's: the hypervisor may take the vCPU away, and interrupts and
// kernel threads run there too. Each such stop delays every answer in
// flight and is charged to no process. Before the rows the harness spins
// a thread on each pinned CPU, at the servers' nice, and records how long
// it went without running: what the host does to a thread that only
// spins, the floor under the fixed-rate rows' p99.9 (docs/BENCHMARKS.md,
// "Host stalls").

// stallProbeWindow is how long the probe spins on each CPU, both at once.
const stallProbeWindow = 2 * time.Second

// stallFloor is the gap between two clock reads counted as a stall: a
// timer tick or a scheduler check costs a few microseconds, well below.
const stallFloor = 100 * time.Microsecond

// stallReport is what the thread spinning on one CPU saw.
type stallReport struct {
	CPU    int    `json:"cpu"`
	Role   string `json:"role"` // "server" or "load generator"
	Window string `json:"window"`
	// Max is the longest gap between two clock reads.
	Max string `json:"max"`
	// Over1ms counts the gaps longer than 1 ms.
	Over1ms int `json:"over_1ms"`
	// LostPct is the share of the window spent in gaps over stallFloor.
	LostPct float64 `json:"lost_pct"`
	Error   string  `json:"error,omitempty"`
}

// stalls measures gaps of a spinning loop until d has passed: the
// longest, those over 1 ms, and the total time in gaps over stallFloor.
func stalls(d time.Duration) (longest time.Duration, over1ms int, lost time.Duration) {
	start := time.Now()
	last := start
	for {
		now := time.Now()
		g := now.Sub(last)
		last = now
		if g > stallFloor {
			lost += g
			longest = max(longest, g)
			if g > time.Millisecond {
				over1ms++
			}
		}
		if now.Sub(start) >= d {
			return longest, over1ms, lost
		}
	}
}

// probeStalls spins on the server's and the load generator's CPUs at
// once for stallProbeWindow, each on a thread of its own pinned there.
func (b *bench) probeStalls() []stallReport {
	cpus := []struct {
		cpu  int
		role string
	}{{b.opt.serverCPU, "server"}, {b.opt.loadCPU, "load generator"}}
	// A P for each spinning thread beside the harness's own: with no P
	// to spare, the runtime would take turns between a spinner and the
	// harness's other goroutines, and count its own time slices as stalls.
	prev := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(prev + len(cpus))
	defer runtime.GOMAXPROCS(prev)
	out := make([]stallReport, len(cpus))
	var wg sync.WaitGroup
	for i, c := range cpus {
		wg.Go(func() {
			r := stallReport{CPU: c.cpu, Role: c.role, Window: stallProbeWindow.String()}
			longest, n, lost, err := spinOn(c.cpu, b.opt.nice, stallProbeWindow)
			if err != nil {
				r.Error = err.Error()
			} else {
				r.Max = longest.Round(time.Microsecond).String()
				r.Over1ms = n
				r.LostPct = 100 * lost.Seconds() / stallProbeWindow.Seconds()
			}
			out[i] = r
		})
	}
	wg.Wait()
	return out
}

// describeStalls is the header line of the probe's reports.
func describeStalls(rs []stallReport) string {
	var parts []string
	for _, r := range rs {
		if r.Error != "" {
			parts = append(parts, fmt.Sprintf("%s CPU %d: not measured (%s)", r.Role, r.CPU, r.Error))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s CPU %d: longest %s, %d over 1ms, %.2f%% of the time in stops over %v",
			r.Role, r.CPU, r.Max, r.Over1ms, r.LostPct, stallFloor))
	}
	return strings.Join(parts, "; ")
}
