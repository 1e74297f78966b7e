package native_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"tradergate/proxy/native"
)

var mergeBase = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(sec int) *time.Time {
	t := mergeBase.Add(time.Duration(sec) * time.Second)
	return &t
}

// routeOf is a route's report with the counts given and nothing else.
func routeOf(name string, mode native.Mode, equal, different int64) native.RouteReport {
	return native.RouteReport{Route: name, Mode: mode, EffectiveMode: mode, Sample: 1,
		Compared: equal + different, Equal: equal, Different: different,
		Requests: map[string]int64{}, TopPaths: []native.PathCount{}, Recent: []native.DiffRecord{}}
}

func replicaOf(id string, routes ...native.RouteReport) native.ReplicaReport {
	return native.ReplicaReport{Replica: id, Report: native.Report{Scope: "replica", Replicas: 1, Enabled: true, Routes: routes}}
}

func diffsAt(path string, secs ...int) []native.DiffRecord {
	var out []native.DiffRecord
	for _, s := range secs {
		out = append(out, native.DiffRecord{Path: path, Legacy: "1", Native: "2", At: *at(s)})
	}
	return out
}

func TestMerge(t *testing.T) {
	with := func(r native.RouteReport, edit func(*native.RouteReport)) native.RouteReport {
		edit(&r)
		return r
	}
	for _, tc := range []struct {
		name string
		reps []native.ReplicaReport
		want native.Report
	}{{
		name: "no replica",
		want: native.Report{Scope: "fleet", Routes: []native.RouteReport{}},
	}, {
		name: "one replica is its own report, scope fleet",
		reps: []native.ReplicaReport{replicaOf("a", with(routeOf("tx", native.ModeShadow, 3, 1), func(r *native.RouteReport) {
			r.Requests = map[string]int64{"ok": 4}
			r.TopPaths = []native.PathCount{{Path: "data.x", Count: 1}}
			r.Recent = diffsAt("data.x", 5)
		}))},
		want: native.Report{Scope: "fleet", Replicas: 1, Enabled: true, Routes: []native.RouteReport{
			with(routeOf("tx", native.ModeShadow, 3, 1), func(r *native.RouteReport) {
				r.Requests = map[string]int64{"ok": 4}
				r.TopPaths = []native.PathCount{{Path: "data.x", Count: 1}}
				r.Recent = diffsAt("data.x", 5)
			})}},
	}, {
		name: "counts, calls by result and window figures are summed",
		reps: []native.ReplicaReport{
			replicaOf("a", with(routeOf("tx", native.ModeCanary, 3, 1), func(r *native.RouteReport) {
				r.Skipped, r.NativeErrors, r.ContractBreaks, r.Dropped = 1, 2, 3, 4
				r.Compared += r.ContractBreaks
				r.Requests = map[string]int64{"ok": 5, "5xx": 2}
				r.Rollback = native.RollbackReport{WindowCalls: 7, WindowErrors: 2, WindowCompared: 4, WindowDifferent: 1}
			})),
			replicaOf("b", with(routeOf("tx", native.ModeCanary, 10, 0), func(r *native.RouteReport) {
				r.Skipped, r.Dropped = 2, 1
				r.Requests = map[string]int64{"ok": 10, "timeout": 1}
				r.Rollback = native.RollbackReport{WindowCalls: 11, WindowErrors: 1, WindowCompared: 10}
			})),
		},
		want: native.Report{Scope: "fleet", Replicas: 2, Enabled: true, Routes: []native.RouteReport{
			with(routeOf("tx", native.ModeCanary, 13, 1), func(r *native.RouteReport) {
				r.Skipped, r.NativeErrors, r.ContractBreaks, r.Dropped = 3, 2, 3, 5
				r.Compared += r.ContractBreaks
				r.Requests = map[string]int64{"ok": 15, "5xx": 2, "timeout": 1}
				r.Rollback = native.RollbackReport{WindowCalls: 18, WindowErrors: 3, WindowCompared: 14, WindowDifferent: 1}
			})}},
	}, {
		name: "top paths summed by path, ranked again and cut to ten",
		reps: []native.ReplicaReport{
			replicaOf("a", with(routeOf("tx", native.ModeShadow, 0, 20), func(r *native.RouteReport) {
				r.TopPaths = []native.PathCount{{Path: "p00", Count: 9}, {Path: "p01", Count: 1}}
				for i := 2; i < 10; i++ {
					r.TopPaths = append(r.TopPaths, native.PathCount{Path: fmt.Sprintf("p%02d", i), Count: 1})
				}
			})),
			replicaOf("b", with(routeOf("tx", native.ModeShadow, 0, 20), func(r *native.RouteReport) {
				r.TopPaths = []native.PathCount{{Path: "p10", Count: 12}, {Path: "p01", Count: 8}, {Path: "p11", Count: 2}}
			})),
		},
		want: native.Report{Scope: "fleet", Replicas: 2, Enabled: true, Routes: []native.RouteReport{
			with(routeOf("tx", native.ModeShadow, 0, 40), func(r *native.RouteReport) {
				r.TopPaths = []native.PathCount{{Path: "p10", Count: 12}, {Path: "p00", Count: 9}, {Path: "p01", Count: 9}, {Path: "p11", Count: 2}}
				for i := 2; i < 8; i++ {
					r.TopPaths = append(r.TopPaths, native.PathCount{Path: fmt.Sprintf("p%02d", i), Count: 1})
				}
			})}},
	}, {
		name: "recent differences merged by time, the last twenty kept",
		reps: []native.ReplicaReport{
			replicaOf("a", with(routeOf("tx", native.ModeShadow, 0, 15), func(r *native.RouteReport) {
				r.Recent = diffsAt("a", 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28)
			})),
			replicaOf("b", with(routeOf("tx", native.ModeShadow, 0, 15), func(r *native.RouteReport) {
				r.Recent = diffsAt("b", 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29)
			})),
		},
		want: native.Report{Scope: "fleet", Replicas: 2, Enabled: true, Routes: []native.RouteReport{
			with(routeOf("tx", native.ModeShadow, 0, 30), func(r *native.RouteReport) {
				r.Recent = []native.DiffRecord{}
				for s := 10; s < 30; s++ {
					r.Recent = append(r.Recent, diffsAt(map[bool]string{true: "a", false: "b"}[s%2 == 0], s)...)
				}
			})}},
	}, {
		name: "rolled back on one replica: says which, the others still run the mode",
		reps: []native.ReplicaReport{
			replicaOf("a", routeOf("tx", native.ModeCanary, 1, 0)),
			replicaOf("b", with(routeOf("tx", native.ModeCanary, 0, 0), func(r *native.RouteReport) {
				r.EffectiveMode = native.ModeShadow
				r.Rollback = native.RollbackReport{RolledBack: true, Reason: "errors", At: at(3), WindowCalls: 5, WindowErrors: 5}
			})),
		},
		want: native.Report{Scope: "fleet", Replicas: 2, Enabled: true, Routes: []native.RouteReport{
			with(routeOf("tx", native.ModeCanary, 1, 0), func(r *native.RouteReport) {
				r.Rollback = native.RollbackReport{RolledBack: true, Reason: "errors", At: at(3), RolledBackOn: []string{"b"},
					WindowCalls: 5, WindowErrors: 5}
			})}},
	}, {
		name: "rolled back on every replica: shadow, the earliest reason, ids sorted",
		reps: []native.ReplicaReport{
			replicaOf("c", with(routeOf("tx", native.ModeNative, 0, 0), func(r *native.RouteReport) {
				r.EffectiveMode = native.ModeShadow
				r.Rollback = native.RollbackReport{RolledBack: true, Reason: "late", At: at(9)}
			})),
			replicaOf("a", with(routeOf("tx", native.ModeNative, 0, 0), func(r *native.RouteReport) {
				r.EffectiveMode = native.ModeShadow
				r.Rollback = native.RollbackReport{RolledBack: true, Reason: "early", At: at(2)}
			})),
		},
		want: native.Report{Scope: "fleet", Replicas: 2, Enabled: true, Routes: []native.RouteReport{
			with(routeOf("tx", native.ModeNative, 0, 0), func(r *native.RouteReport) {
				r.EffectiveMode = native.ModeShadow
				r.Rollback = native.RollbackReport{RolledBack: true, Reason: "early", At: at(2), RolledBackOn: []string{"a", "c"}}
			})}},
	}, {
		name: "routes in the order first met, configured as the first report says",
		reps: []native.ReplicaReport{
			replicaOf("a", with(routeOf("tx", native.ModeShadow, 1, 0), func(r *native.RouteReport) { r.Sample = 0.5 })),
			replicaOf("b", routeOf("wallet_address", native.ModeShadow, 2, 0), routeOf("tx", native.ModeCanary, 1, 0)),
		},
		want: native.Report{Scope: "fleet", Replicas: 2, Enabled: true, Routes: []native.RouteReport{
			with(routeOf("tx", native.ModeShadow, 2, 0), func(r *native.RouteReport) { r.Sample = 0.5 }),
			routeOf("wallet_address", native.ModeShadow, 2, 0),
		}},
	}, {
		name: "enabled when any replica is",
		reps: []native.ReplicaReport{
			{Replica: "a", Report: native.Report{Scope: "replica", Replicas: 1, Routes: []native.RouteReport{}}},
			replicaOf("b"),
		},
		want: native.Report{Scope: "fleet", Replicas: 2, Enabled: true, Routes: []native.RouteReport{}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := native.Merge(tc.reps)
			if !reflect.DeepEqual(got, tc.want) {
				g, _ := json.MarshalIndent(got, "", " ")
				w, _ := json.MarshalIndent(tc.want, "", " ")
				t.Errorf("Merge:\n%s\nwant\n%s", g, w)
			}
		})
	}
}

// The merged report shares no map or slice with the replicas' reports:
// changing it leaves them as they were.
func TestMergeCopies(t *testing.T) {
	r := routeOf("tx", native.ModeShadow, 1, 1)
	r.Requests = map[string]int64{"ok": 2}
	r.TopPaths = []native.PathCount{{Path: "data.x", Count: 1}}
	r.Recent = diffsAt("data.x", 1)
	r.Rollback = native.RollbackReport{RolledBack: true, Reason: "diffs", At: at(1)}
	reps := []native.ReplicaReport{replicaOf("a", r)}
	before, _ := json.Marshal(reps)

	got := native.Merge(reps).Routes[0]
	got.Requests["ok"] = 99
	got.TopPaths[0].Count = 99
	got.Recent[0].Path = "changed"
	*got.Rollback.At = got.Rollback.At.Add(time.Hour)
	got.Rollback.RolledBackOn[0] = "changed"
	if after, _ := json.Marshal(reps); string(after) != string(before) {
		t.Errorf("Merge's result shares memory with its input:\n%s\nwas\n%s", after, before)
	}
}
