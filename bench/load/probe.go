package load

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"tradergate/bench/cpustat"
)

// counters is one reading of everything a row compares across the window:
// the two CPUs, the server's process group and the upstream's counter.
type counters struct {
	server, load cpustat.CPUTimes
	cpuErr       error
	proc         cpustat.Usage
	procErr      error
	upstream     int64
	upErr        error
	mem          cpustat.Memory
	memErr       error
	metrics      map[string]float64
	hists        map[string][]Bucket
	metricsErr   error
	redis        map[string]int64
	redisErr     error
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
		c.proc, c.procErr = cpustat.GroupUsage(s.ServerPGID)
		c.mem, c.memErr = cpustat.GroupMemory(s.ServerPGID)
	}
	if s.StatsURL != "" {
		c.upstream, c.upErr = p.upstream(ctx)
	}
	if s.MetricsURL != "" {
		c.metrics, c.hists, c.metricsErr = p.scrape(ctx)
	}
	if s.RedisAddr != "" {
		c.redis, c.redisErr = RedisCommandStats(s.RedisAddr)
	}
	return c
}

// scrape reads Spec.Metrics and Spec.Histograms off the server's metrics
// endpoint.
func (p *probe) scrape(ctx context.Context) (map[string]float64, map[string][]Bucket, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.spec.MetricsURL, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("metrics: status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, nil, err
	}
	return ParseMetrics(body, p.spec.Metrics), ParseHistograms(body, p.spec.Histograms), nil
}

// Bucket is one bucket of a Prometheus histogram: the count of values at
// or below Le (cumulative, as exposed). The +Inf bucket's Le is InfBound,
// which JSON can carry.
type Bucket struct {
	Le    float64
	Count float64
}

// ParseHistograms reads the buckets of the named unlabelled histograms
// (name_bucket{le="..."} samples) from a Prometheus text exposition, in
// the order exposed (ascending le, +Inf last).
func ParseHistograms(text []byte, names []string) map[string][]Bucket {
	out := map[string][]Bucket{}
	if len(names) == 0 {
		return out
	}
	want := make(map[string]string, len(names))
	for _, n := range names {
		want[n+`_bucket{le="`] = n
	}
	for line := range bytes.Lines(text) {
		line = bytes.TrimSpace(line)
		open := bytes.Index(line, []byte(`{le="`))
		if open < 0 || line[0] == '#' {
			continue
		}
		name, ok := want[string(line[:open+5])]
		if !ok {
			continue
		}
		le, rest, ok := bytes.Cut(line[open+5:], []byte(`"} `))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) == 0 {
			continue
		}
		bound, err1 := strconv.ParseFloat(string(le), 64)
		count, err2 := strconv.ParseFloat(string(f[0]), 64)
		if math.IsInf(bound, 1) {
			bound = InfBound
		}
		if err1 == nil && err2 == nil {
			out[name] = append(out[name], Bucket{bound, count})
		}
	}
	return out
}

// InfBound stands for the +Inf bucket's bound.
const InfBound = math.MaxFloat64

// HistogramDelta is what a histogram counted between two readings of
// its cumulative buckets, bucket by bucket (still cumulative); nil when
// the two do not have the same buckets.
func HistogramDelta(before, after []Bucket) []Bucket {
	if len(before) != len(after) {
		return nil
	}
	out := make([]Bucket, len(after))
	for i := range after {
		if before[i].Le != after[i].Le {
			return nil
		}
		out[i] = Bucket{after[i].Le, after[i].Count - before[i].Count}
	}
	return out
}

// BucketQuantile is the upper bound of the bucket holding the q-th
// quantile (0..1) of a cumulative histogram: the value at or below which
// that share of the counts lie, at the buckets' resolution. Zero when
// empty; InfBound when it lies in the +Inf bucket.
func BucketQuantile(b []Bucket, q float64) float64 {
	if len(b) == 0 || b[len(b)-1].Count <= 0 {
		return 0
	}
	rank := q * b[len(b)-1].Count
	for _, x := range b {
		if x.Count >= rank && x.Count > 0 {
			return x.Le
		}
	}
	return b[len(b)-1].Le
}

// ParseMetrics reads the unlabelled samples of the named series from a
// Prometheus text exposition; a summary's or histogram's name matches its
// name_sum and name_count samples. Labelled samples are left out: the
// figures read here (Go runtime, cache totals) have none.
func ParseMetrics(text []byte, names []string) map[string]float64 {
	want := make(map[string]bool, 3*len(names))
	for _, n := range names {
		want[n], want[n+"_sum"], want[n+"_count"] = true, true, true
	}
	out := map[string]float64{}
	for line := range bytes.Lines(text) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		// "name value [timestamp]"; a labelled sample has "{" in its name.
		f := bytes.Fields(line)
		if len(f) < 2 || !want[string(f[0])] {
			continue
		}
		if v, err := strconv.ParseFloat(string(f[1]), 64); err == nil {
			out[string(f[0])] = v
		}
	}
	return out
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
			used := after.proc.Sub(before.proc)
			res.ServerProcJiffies, res.ServerMinorFaults, res.ProcMeasured = used.Jiffies, used.MinorFaults, true
		}
	}
	if s.ServerPGID > 0 {
		// The state at the window's end is the figure; the start's read
		// only has to have worked, like the others.
		if err := firstErr(before.memErr, after.memErr); err != nil {
			res.Problems = append(res.Problems, "memory: "+err.Error())
		} else {
			res.ServerRSS, res.ServerPeakRSS, res.RSSMeasured = after.mem.RSS, after.mem.Peak, true
		}
	}
	if s.MetricsURL != "" {
		if err := firstErr(before.metricsErr, after.metricsErr); err != nil {
			res.Problems = append(res.Problems, "metrics: "+err.Error())
		} else {
			res.MetricsBefore, res.MetricsAfter = before.metrics, after.metrics
			for name, a := range after.hists {
				if d := HistogramDelta(before.hists[name], a); d != nil {
					if res.Histograms == nil {
						res.Histograms = map[string][]Bucket{}
					}
					res.Histograms[name] = d
				}
			}
		}
	}
	if s.RedisAddr != "" {
		if err := firstErr(before.redisErr, after.redisErr); err != nil {
			res.Problems = append(res.Problems, "redis commandstats: "+err.Error())
		} else {
			res.RedisCalls, res.RedisMeasured = RedisDelta(before.redis, after.redis), true
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
