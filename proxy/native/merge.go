package native

import "slices"

// ReplicaReport is one replica's report with the replica's id, as the
// replicas of a fleet post it for each other (see Aggregator).
type ReplicaReport struct {
	Replica string `json:"replica"`
	Report  Report `json:"report"`
}

// Merge is the fleet's report made of the replicas' own: per route the
// counts, native calls by result and the window's figures summed, the
// differing paths summed by path and ranked again, and the last
// differences of all, by time. A route is rolled back when any replica
// rolled it back: RolledBackOn lists which, Reason and At are the
// earliest rollback's, and EffectiveMode is "shadow" only when every
// replica that reports the route rolled it back (the others still run
// Mode).
//
// The configuration of a route (Mode, Sample, Percent) is the first
// report's that holds it: reps[0] should be the replica that answers.
// Routes come in the order they are first met. The top paths are ranked
// among each replica's top paths, so a path just below every replica's
// cut may be missing from the fleet's. Merge keeps no reference to reps'
// maps or slices.
func Merge(reps []ReplicaReport) Report {
	out := Report{Scope: "fleet", Replicas: len(reps), Routes: []RouteReport{}}
	type acc struct {
		r         RouteReport
		paths     map[string]int64
		reporters int
	}
	var order []string
	routes := map[string]*acc{}
	for _, rep := range reps {
		out.Enabled = out.Enabled || rep.Report.Enabled
		for _, r := range rep.Report.Routes {
			a := routes[r.Route]
			if a == nil {
				a = &acc{
					r: RouteReport{Route: r.Route, Mode: r.Mode, Sample: r.Sample, Percent: r.Percent,
						Requests: map[string]int64{}, Recent: []DiffRecord{}},
					paths: map[string]int64{},
				}
				routes[r.Route] = a
				order = append(order, r.Route)
			}
			a.reporters++
			addRoute(&a.r, r)
			for _, p := range r.TopPaths {
				a.paths[p.Path] += p.Count
			}
			if r.Rollback.RolledBack {
				addRollback(&a.r.Rollback, r.Rollback, rep.Replica)
			}
		}
	}
	for _, name := range order {
		a := routes[name]
		r := a.r
		r.TopPaths = make([]PathCount, 0, len(a.paths))
		for p, n := range a.paths {
			r.TopPaths = append(r.TopPaths, PathCount{p, n})
		}
		r.TopPaths = rankPaths(r.TopPaths)
		slices.SortStableFunc(r.Recent, func(x, y DiffRecord) int { return x.At.Compare(y.At) })
		r.Recent = slices.Clip(r.Recent[max(len(r.Recent)-recentDiffs, 0):])
		slices.Sort(r.Rollback.RolledBackOn)
		r.EffectiveMode = r.Mode
		if len(r.Rollback.RolledBackOn) == a.reporters && a.reporters > 0 {
			r.EffectiveMode = ModeShadow
		}
		out.Routes = append(out.Routes, r)
	}
	return out
}

// addRoute adds the counts of r to sum.
func addRoute(sum *RouteReport, r RouteReport) {
	sum.Compared += r.Compared
	sum.Equal += r.Equal
	sum.Different += r.Different
	sum.Skipped += r.Skipped
	sum.NativeErrors += r.NativeErrors
	sum.ContractBreaks += r.ContractBreaks
	sum.Dropped += r.Dropped
	for res, n := range r.Requests {
		sum.Requests[res] += n
	}
	sum.Recent = append(sum.Recent, r.Recent...)
	w, rw := &sum.Rollback, r.Rollback
	w.WindowCalls += rw.WindowCalls
	w.WindowErrors += rw.WindowErrors
	w.WindowCompared += rw.WindowCompared
	w.WindowDifferent += rw.WindowDifferent
}

// addRollback records that replica rolled the route back, keeping the
// earliest rollback's reason and time.
func addRollback(sum *RollbackReport, r RollbackReport, replica string) {
	sum.RolledBackOn = append(sum.RolledBackOn, replica)
	earlier := r.At != nil && (sum.At == nil || r.At.Before(*sum.At))
	if !sum.RolledBack || earlier {
		sum.Reason = r.Reason
		if r.At != nil {
			at := *r.At
			sum.At = &at
		}
	}
	sum.RolledBack = true
}
