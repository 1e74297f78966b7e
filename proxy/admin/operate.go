package admin

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"
	"tradergate/proxy/tlsedge"

	"github.com/prometheus/client_golang/prometheus"
)

// What an operator needs beyond the request counters: which build runs,
// whether the replica is ready, how the last configuration reload went,
// when the certificates expire, and the bounds the live figures are read
// against (cache.max_bytes, upstream.max_concurrent). deploy/ has the
// dashboard and alerts that read them.

// reloads is the outcome of the configuration reloads, for metrics and the
// status page.
type reloads struct {
	mu      sync.Mutex
	ok      bool      // the last reload (or the start) succeeded
	lastOK  time.Time // when the configuration last loaded
	lastAt  time.Time // when the last reload was tried
	lastErr string    // why the last reload failed, "" when it did not
	// counts are the reloads by result, in the order of reloadResults.
	counts [len(reloadResults)]uint64
}

// The results of a reload (tradergate_config_reloads_total{result}).
const (
	// ReloadApplied: the configuration took effect whole.
	ReloadApplied = "applied"
	// ReloadRestartNeeded: what can be reloaded took effect; settings that
	// differ from what runs take effect only on restart, and a warning
	// names them.
	ReloadRestartNeeded = "restart_needed"
	// ReloadFailed: nothing changed; the file did not load or validate,
	// or the cache refused it.
	ReloadFailed = "failed"
)

var reloadResults = [...]string{ReloadApplied, ReloadRestartNeeded, ReloadFailed}

// started records the configuration loaded at start.
func (r *reloads) started() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ok, r.lastOK = true, time.Now()
}

// record records a reload's result, and err when it failed.
func (r *reloads) record(result string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, res := range reloadResults {
		if res == result {
			r.counts[i]++
		}
	}
	r.lastAt = time.Now()
	r.ok = err == nil
	if err == nil {
		r.lastOK, r.lastErr = r.lastAt, ""
		return
	}
	r.lastErr = err.Error()
}

func (r *reloads) count(i int) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return float64(r.counts[i])
}

func (r *reloads) state() (ok bool, lastOK time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ok, r.lastOK
}

// Reloaded records a reload's result (one of the Reload* results), and
// err when it failed.
func (a *Admin) Reloaded(result string, err error) { a.reloads.record(result, err) }

// buildInfo is the module version, VCS revision and Go version of this
// binary.
func buildInfo() (version, revision string) {
	version, revision = "devel", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			version = v
		}
		for _, st := range bi.Settings {
			if st.Key == "vcs.revision" {
				revision = st.Value
			}
		}
	}
	return version, revision
}

// Collectors are the collectors of this file's figures.
func (a *Admin) Collectors() []prometheus.Collector {
	version, revision := buildInfo()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tradergate_build_info",
		Help: "Always 1; the labels say which build runs.",
	}, []string{"version", "revision", "goversion"})
	build.WithLabelValues(version, revision, runtime.Version()).Set(1)
	cs := []prometheus.Collector{
		build,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tradergate_ready",
			Help: "1 while the replica serves and is not draining (/readyz), else 0.",
		}, func() float64 { return b2f(a.p.Ready()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tradergate_config_last_reload_successful",
			Help: "1 when the last configuration reload (or the start) succeeded, else 0.",
		}, func() float64 { ok, _ := a.reloads.state(); return b2f(ok) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tradergate_config_last_reload_success_timestamp_seconds",
			Help: "When the configuration last loaded, Unix seconds.",
		}, func() float64 { _, at := a.reloads.state(); return float64(at.UnixNano()) / 1e9 }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tradergate_cache_max_bytes",
			Help: "cache.max_bytes, the bound of tradergate_cache_bytes.",
		}, func() float64 { return float64(a.p.CacheMaxBytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tradergate_upstream_max_concurrent",
			Help: "upstream.max_concurrent, the bound of tradergate_upstream_in_flight.",
		}, func() float64 { return float64(a.p.MaxConcurrent) }),
		&certCollector{tls: a.p.TLS},
	}
	for i, result := range reloadResults {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tradergate_config_reloads_total",
			Help: "Configuration reloads (SIGHUP) by result: applied (whole); restart_needed (applied, but " +
				"settings that differ from what runs take effect only on restart, named in a warning log line); " +
				"failed (nothing changed).",
			ConstLabels: prometheus.Labels{"result": result},
		}, func() float64 { return a.reloads.count(i) }))
	}
	return cs
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// certCollector reports each served certificate's expiry at scrape time.
type certCollector struct{ tls *tlsedge.Edge }

var descCertExpiry = prometheus.NewDesc("tradergate_tls_certificate_expiry_timestamp_seconds",
	"When a certificate the edge serves expires (NotAfter), Unix seconds, by its first name.", []string{"name"}, nil)

func (c *certCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descCertExpiry }

func (c *certCollector) Collect(ch chan<- prometheus.Metric) {
	for _, cert := range c.tls.Certificates() {
		ch <- prometheus.MustNewConstMetric(descCertExpiry, prometheus.GaugeValue, float64(cert.NotAfter.Unix()), cert.Name)
	}
}
