package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"tradergate/bench/load"
)

// Go runtime series the load generator reads off tradergate's /metrics at
// the window's edges. client_golang's Go collector exports the GC's CPU
// time (go_cpu_classes_gc_total_cpu_seconds_total) only when the runtime
// metrics are switched on (collectors.WithGoCollectorRuntimeMetrics); by
// default it has go_gc_duration_seconds, whose sum is the stop-the-world
// pauses alone, a lower bound. The row says which one it used.
const (
	metricGCCPU    = "go_cpu_classes_gc_total_cpu_seconds_total"
	metricGCPauses = "go_gc_duration_seconds"
	metricMemLimit = "go_gc_gomemlimit_bytes"
	metricCache    = "tradergate_cache_bytes"
	metricEvicted  = "tradergate_cache_evictions_total"
	// metricFiles counts the cache's open page files: whether a hit row's
	// page went out of one (cache/files.go).
	metricFiles = "tradergate_cache_files"
)

// Go runtime series the idle rows read before and after their
// connections open: where an idle connection's memory goes.
const (
	metricHeapInuse  = "go_memstats_heap_inuse_bytes"
	metricStackInuse = "go_memstats_stack_inuse_bytes"
	metricGoroutines = "go_goroutines"
)

func idleMetrics() []string { return []string{metricHeapInuse, metricStackInuse, metricGoroutines} }

// idleNote splits an idle row's growth per connection by the Go
// runtime's own figures, when they were read.
func idleNote(res *load.Result) string {
	b, a := res.MetricsBefore, res.MetricsAfter
	if a == nil || b == nil || res.IdleConns <= 0 {
		return ""
	}
	n := float64(res.IdleConns)
	var parts []string
	for _, m := range []struct{ name, what string }{{metricHeapInuse, "heap in use"}, {metricStackInuse, "goroutine stacks"}} {
		x, ok1 := b[m.name]
		y, ok2 := a[m.name]
		if ok1 && ok2 {
			parts = append(parts, fmt.Sprintf("%s %s", m.what, fmtKB((y-x)/n)))
		}
	}
	if x, ok := b[metricGoroutines]; ok {
		if y, ok := a[metricGoroutines]; ok {
			parts = append(parts, fmt.Sprintf("%.2f goroutines", (y-x)/n))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "per idle connection, by the Go runtime: " + strings.Join(parts, ", ")
}

func scrapedMetrics() []string {
	return []string{metricGCCPU, metricGCPauses, metricMemLimit, metricCache, metricEvicted, metricFiles}
}

// gcFigures sets the row's GC and memory limit figures from the metrics
// read at the window's edges.
func (r *row) gcFigures(res *load.Result) {
	b, a := res.MetricsBefore, res.MetricsAfter
	if a == nil || res.Window <= 0 {
		return
	}
	delta := func(name string) (float64, bool) {
		x, ok1 := b[name]
		y, ok2 := a[name]
		return y - x, ok1 && ok2
	}
	if d, ok := delta(metricGCCPU); ok {
		r.GCCPU, r.GCSource = d/res.Window.Seconds(), "runtime"
	} else if d, ok := delta(metricGCPauses + "_sum"); ok {
		r.GCCPU, r.GCSource = d/res.Window.Seconds(), "pauses"
	}
	r.MemLimit = a[metricMemLimit]
	if d, ok := delta(metricEvicted); ok {
		r.Evictions = int64(d)
	}
	r.CacheHeld = a[metricCache]
	if n, ok := a[metricFiles]; ok {
		files := int64(n)
		r.PageFiles = &files
	}
}

// memoryNote states a row's memory and GC figures.
func (r *row) memoryNote() string {
	if r.RSSBytes == 0 && r.GCSource == "" {
		return ""
	}
	s := fmt.Sprintf("memory at the end: RSS %s (peak %s)", fmtMiB(float64(r.RSSBytes)), fmtMiB(float64(r.PeakRSSBytes)))
	if r.CacheMaxBytes > 0 {
		s += fmt.Sprintf(", cache %s held of cache.max_bytes %s, %d evictions in the window", fmtMiB(r.CacheHeld), fmtMiB(float64(r.CacheMaxBytes)), r.Evictions)
	}
	switch r.GCSource {
	case "runtime":
		s += fmt.Sprintf("; GC %.1f%% of the core", 100*r.GCCPU)
	case "pauses":
		s += fmt.Sprintf("; GC stop-the-world pauses %.2f%% of the core (the edge does not export %s, so concurrent marking is not counted)", 100*r.GCCPU, metricGCCPU)
	}
	if r.GCSource != "" {
		s += ", Go memory limit " + fmtLimit(r.MemLimit)
	}
	if r.FaultsPerReq > 0 {
		s += fmt.Sprintf("; %.1f minor page faults per request", r.FaultsPerReq)
	}
	return s
}

// memoryBound is the memory target's bound for a cache of maxBytes:
// 1.5 × cache.max_bytes + 64 MiB.
func memoryBound(maxBytes int64) float64 { return 1.5*float64(maxBytes) + 64<<20 }

func fmtMiB(b float64) string {
	if b <= 0 {
		return "—"
	}
	return strconv.FormatFloat(b/(1<<20), 'f', 0, 64) + " MiB"
}

// fmtLimit renders go_gc_gomemlimit_bytes: math.MaxInt64 is no limit.
func fmtLimit(b float64) string {
	switch {
	case b <= 0:
		return "not exported"
	case b >= math.MaxInt64/2:
		return "none (GOMEMLIMIT unset)"
	}
	return fmtMiB(b)
}
