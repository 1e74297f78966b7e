package native

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcome is what became of one miss offered for a comparison. Its String
// is the outcome label of tradergate_native_comparisons_total.
type Outcome uint8

const (
	// Equal: both answers are the same JSON value.
	Equal Outcome = iota
	// Different: they differ; the paths are in the report.
	Different
	// Skipped: the page is fresh, so it was not compared (nor fetched).
	Skipped
	// ContractBroken: native's answer breaks docs/openapi.json; its
	// differences are in the report too.
	ContractBroken
	// NativeError: native gave no answer to compare (see Result).
	NativeError
	outcomes
)

var outcomeNames = [outcomes]string{
	Equal: "equal", Different: "different", Skipped: "skipped", ContractBroken: "contract_break", NativeError: "native_error",
}

func (o Outcome) String() string { return outcomeNames[o] }

// Bounds of what a route keeps of its differences.
const (
	recentDiffs = 20   // the last differences, with their values
	topPaths    = 10   // paths in the report, most frequent first
	maxPaths    = 1000 // distinct paths counted; more go to otherPaths
	otherPaths  = "<other paths>"
)

// routeState is what a route counted since start; a reload keeps it.
type routeState struct {
	name     string
	outcomes [outcomes]atomic.Int64
	results  [len(resultNames)]atomic.Int64
	dropped  atomic.Int64

	mu     sync.Mutex // guards what follows
	paths  map[string]int64
	recent []DiffRecord // a ring of recentDiffs, next at head
	head   int
}

func newRouteState(name string) *routeState {
	return &routeState{name: name, paths: map[string]int64{}}
}

func (rs *routeState) outcome(m *metrics, o Outcome) {
	rs.outcomes[o].Add(1)
	m.comparisons.WithLabelValues(rs.name, o.String()).Inc()
}

// differences keeps what a comparison found.
func (rs *routeState) differences(c Comparison, at time.Time) {
	if c.Count == 0 {
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for p, n := range c.ByPath {
		if _, ok := rs.paths[p]; !ok && len(rs.paths) >= maxPaths {
			p = otherPaths
		}
		rs.paths[p] += int64(n)
	}
	for _, d := range c.Kept {
		r := DiffRecord{Path: d.Path, Legacy: d.Legacy, Native: d.Native, At: at.UTC()}
		if len(rs.recent) < recentDiffs {
			rs.recent = append(rs.recent, r)
		} else {
			rs.recent[rs.head] = r
		}
		rs.head = (rs.head + 1) % recentDiffs
	}
}

// metrics are the package's series, on the registry passed to New.
type metrics struct {
	requests    *prometheus.CounterVec // route, result
	comparisons *prometheus.CounterVec // route, outcome
	rolledBack  *prometheus.GaugeVec   // route
	dropped     *prometheus.CounterVec // route
}

func newMetrics(reg prometheus.Registerer, routes []string) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tradergate_native_requests_total",
			Help: "Calls to the native service, for clients and for comparisons, by route and result.",
		}, []string{"route", "result"}),
		comparisons: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tradergate_native_comparisons_total",
			Help: "Misses offered for a comparison with native, by route and outcome (equal, different, skipped, contract_break, native_error).",
		}, []string{"route", "outcome"}),
		rolledBack: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tradergate_native_rolled_back",
			Help: "1 while a route in canary or native mode is rolled back to legacy by native.rollback, until a reload.",
		}, []string{"route"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tradergate_native_shadow_dropped_total",
			Help: "Comparisons dropped because the shadow queue was full, by route.",
		}, []string{"route"}),
	}
	for _, r := range routes {
		for o := range outcomes {
			m.comparisons.WithLabelValues(r, o.String())
		}
		m.requests.WithLabelValues(r, OK.String())
		m.rolledBack.WithLabelValues(r)
		m.dropped.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.comparisons, m.rolledBack, m.dropped} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Report is the answer of GET /shadow: per route its modes, what the
// comparisons found and the rollback's state. It holds no key, credential
// or client identity.
type Report struct {
	// Scope is "replica" (this replica's figures) or "fleet" (merged by
	// Options.Fleet).
	Scope string `json:"scope"`
	// Replicas is how many replicas' figures the report holds: 1 for a
	// replica's own.
	Replicas int `json:"replicas"`
	// Enabled: native.base_url is set and some route is not legacy.
	Enabled bool          `json:"enabled"`
	Routes  []RouteReport `json:"routes"`
}

// RouteReport is one route of the report.
type RouteReport struct {
	Route string `json:"route"`
	// Mode is the configured mode; EffectiveMode what runs: a route rolled
	// back is "shadow" (clients on legacy, comparisons going on).
	Mode          Mode    `json:"mode"`
	EffectiveMode Mode    `json:"effective_mode"`
	Sample        float64 `json:"sample"`
	Percent       float64 `json:"percent"`
	// Compared counts the comparisons made: Equal + Different +
	// ContractBreaks.
	Compared       int64 `json:"compared"`
	Equal          int64 `json:"equal"`
	Different      int64 `json:"different"`
	Skipped        int64 `json:"skipped"`
	NativeErrors   int64 `json:"native_errors"`
	ContractBreaks int64 `json:"contract_breaks"`
	// Dropped counts comparisons refused by a full queue.
	Dropped int64 `json:"dropped"`
	// Requests counts native calls (for clients and for comparisons) by
	// result; results that never happened are left out.
	Requests map[string]int64 `json:"requests"`
	// TopPaths are the most frequent differing paths, most first.
	TopPaths []PathCount `json:"top_paths"`
	// Recent are the last differences, oldest first.
	Recent   []DiffRecord   `json:"recent"`
	Rollback RollbackReport `json:"rollback"`
}

// PathCount is how many differences were found at a path.
type PathCount struct {
	Path  string `json:"path"`
	Count int64  `json:"count"`
}

// DiffRecord is one difference found, with both values (cut to 200 bytes).
type DiffRecord struct {
	Path   string    `json:"path"`
	Legacy string    `json:"legacy"`
	Native string    `json:"native"`
	At     time.Time `json:"at"`
}

// RollbackReport is a route's rollback state, and the window's figures.
type RollbackReport struct {
	RolledBack bool       `json:"rolled_back"`
	Reason     string     `json:"reason,omitempty"`
	At         *time.Time `json:"at,omitempty"`
	// RolledBackOn are the ids of the replicas that rolled the route back,
	// in a fleet report (see Merge); empty in a replica's own.
	RolledBackOn []string `json:"rolled_back_on,omitempty"`
	// The window's counts: native calls and failures, comparisons and
	// those that differed.
	WindowCalls     int `json:"window_calls"`
	WindowErrors    int `json:"window_errors"`
	WindowCompared  int `json:"window_compared"`
	WindowDifferent int `json:"window_different"`
}

// rankPaths sorts ps most frequent first (by path among equals) and keeps
// the first topPaths.
func rankPaths(ps []PathCount) []PathCount {
	slices.SortFunc(ps, func(a, b PathCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Path, b.Path))
	})
	return ps[:min(len(ps), topPaths)]
}

// Aggregator merges a replica's report with the fleet's (through Redis,
// as GET /migration does). The package has none of its own.
type Aggregator interface {
	Aggregate(ctx context.Context, local Report) (Report, error)
}

// Report is this replica's report.
func (b *Backend) Report() Report {
	g := b.gen.Load()
	now := b.now()
	rep := Report{Scope: "replica", Replicas: 1, Enabled: g.cfg.Enabled(), Routes: make([]RouteReport, 0, len(b.names))}
	for _, name := range b.names {
		rs, rg := b.routes[name], g.routes[name]
		r := RouteReport{
			Route: name, Mode: rg.rc.Mode, EffectiveMode: rg.rc.Mode,
			Sample: rg.rc.sample(), Percent: rg.rc.Percent,
			Equal:          rs.outcomes[Equal].Load(),
			Different:      rs.outcomes[Different].Load(),
			Skipped:        rs.outcomes[Skipped].Load(),
			NativeErrors:   rs.outcomes[NativeError].Load(),
			ContractBreaks: rs.outcomes[ContractBroken].Load(),
			Dropped:        rs.dropped.Load(),
			Requests:       map[string]int64{},
			TopPaths:       []PathCount{},
			Recent:         []DiffRecord{},
		}
		r.Compared = r.Equal + r.Different + r.ContractBreaks
		for i := range rs.results {
			if n := rs.results[i].Load(); n > 0 {
				r.Requests[Result(i).String()] = n
			}
		}
		back, reason, at, w := rg.rb.state(now)
		r.Rollback = RollbackReport{RolledBack: back, Reason: reason,
			WindowCalls: w.calls, WindowErrors: w.errors, WindowCompared: w.compared, WindowDifferent: w.differed}
		if back {
			at = at.UTC()
			r.Rollback.At = &at
			r.EffectiveMode = ModeShadow
		}
		rs.mu.Lock()
		for p, n := range rs.paths {
			r.TopPaths = append(r.TopPaths, PathCount{p, n})
		}
		r.Recent = append(r.Recent, rs.recent[rs.head%max(len(rs.recent), 1):]...)
		r.Recent = append(r.Recent, rs.recent[:rs.head%max(len(rs.recent), 1)]...)
		rs.mu.Unlock()
		r.TopPaths = rankPaths(r.TopPaths)
		rep.Routes = append(rep.Routes, r)
	}
	return rep
}

// ServeHTTP answers GET /shadow with the report, as JSON; with
// Options.Fleet, the fleet's, or this replica's when the fleet's cannot
// be had.
func (b *Backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	rep := b.Report()
	if b.opt.Fleet != nil {
		if fleet, err := b.opt.Fleet.Aggregate(r.Context(), rep); err == nil {
			rep = fleet
		} else {
			b.log.Warn("shadow report: the fleet's figures could not be had; this replica's only", "err", err)
		}
	}
	body, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		http.Error(w, "report: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(body, '\n'))
}
