package load

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Lines h2load prints, flushed, as its phases of a timed run (-D with
// --warm-up-time) change: the counters are read on them, so that they
// cover h2load's own measured window.
const (
	h2loadWarmupOver  = "Warm-up phase is over"
	h2loadMainOver    = "Main benchmark duration is over"
	h2loadMaxOutBytes = 1 << 20
)

// runH2load runs s.Command and reads the window's counters on h2load's
// phase lines. h2load inherits the load generator's CPU. Its output is
// copied to stderr, which the harness keeps in the row's log.
func runH2load(ctx context.Context, s *Spec) (*Result, error) {
	cmd := exec.CommandContext(ctx, s.Command[0], s.Command[1:]...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := newProbe(s)
	before := p.read(ctx)
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("h2load: %w", err)
	}
	var (
		text       bytes.Buffer
		after      counters
		afterRead  bool
		t1         time.Time
		sawWarmup  bool
		sc         = bufio.NewScanner(out)
		scanErrMsg string
	)
	for sc.Scan() {
		line := sc.Text()
		if text.Len() < h2loadMaxOutBytes {
			text.WriteString(line)
			text.WriteByte('\n')
		}
		switch {
		case strings.Contains(line, h2loadWarmupOver) && !sawWarmup:
			sawWarmup = true
			before, t0 = p.read(ctx), time.Now()
		case strings.Contains(line, h2loadMainOver) && !afterRead:
			after, t1, afterRead = p.read(ctx), time.Now(), true
		}
	}
	if err := sc.Err(); err != nil {
		scanErrMsg = err.Error()
	}
	werr := cmd.Wait()
	if !afterRead {
		after, t1 = p.read(ctx), time.Now()
	}
	_, _ = os.Stderr.Write(text.Bytes())
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if werr != nil {
		return nil, fmt.Errorf("h2load: %w: %s", werr, lastLines(text.String(), 5))
	}
	res, err := ParseH2load(text.String())
	if err != nil {
		return nil, err
	}
	res.Window = t1.Sub(t0)
	if !sawWarmup && s.Warmup > 0 {
		res.Problems = append(res.Problems, "h2load printed no end of warm-up: the counters span it")
	}
	if scanErrMsg != "" {
		res.Problems = append(res.Problems, "h2load output: "+scanErrMsg)
	}
	p.fill(res, before, after)
	return res, nil
}

// h2load's summary lines (nghttp2's h2load.cc).
var (
	h2loadFinished = regexp.MustCompile(`(?m)^finished in ([0-9.]+)(m?s), ([0-9.]+) req/s`)
	h2loadRequests = regexp.MustCompile(`(?m)^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`)
	h2loadStatus   = regexp.MustCompile(`(?m)^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx`)
	h2loadTime     = regexp.MustCompile(`(?m)^time for request:\s+(\S+)\s+(\S+)\s+(\S+)`)
	h2loadProto    = regexp.MustCompile(`(?m)^Application protocol: (\S+)`)
)

// ParseH2load reads a Result from h2load's output: answers, errors,
// req/s, and the mean and maximum time per request (h2load reports no
// percentiles). Requests are the 2xx answers. Errors are h2load's failed
// requests (every non-2xx/3xx answer, and the errored ones, a subset)
// plus the 3xx answers, which h2load counts as succeeded; Status counts
// answers by class (200, 300, 400, 500). Body bytes are left out: h2load's
// data figure counts the warm-up too.
func ParseH2load(text string) (*Result, error) {
	m := h2loadRequests.FindStringSubmatch(text)
	if m == nil {
		return nil, fmt.Errorf("h2load: no requests line in its output: %s", lastLines(text, 5))
	}
	n := atoiAll(m[1:])
	failed, errored := n[4], n[5]
	sm := h2loadStatus.FindStringSubmatch(text)
	if sm == nil {
		return nil, errors.New("h2load: no status codes line in its output")
	}
	codes := atoiAll(sm[1:])
	res := &Result{Requests: codes[0], Errors: failed + codes[1], TransportErrors: errored, Status: map[int]int64{}}
	for i, c := range codes {
		if c > 0 {
			res.Status[200+100*i] = c
		}
	}
	f := h2loadFinished.FindStringSubmatch(text)
	if f == nil {
		return nil, errors.New("h2load: no finished line in its output")
	}
	res.RPS, _ = strconv.ParseFloat(f[3], 64)
	if done := n[2]; done > 0 {
		// h2load's req/s counts every request done; the row's are the 2xx.
		res.RPS *= float64(codes[0]) / float64(done)
	}
	if t := h2loadTime.FindStringSubmatch(text); t != nil {
		res.Latency.Max, _ = parseH2loadDuration(t[2])
		res.Latency.Mean, _ = parseH2loadDuration(t[3])
	}
	if p := h2loadProto.FindStringSubmatch(text); p != nil {
		res.Protocol = p[1]
	}
	return res, nil
}

// parseH2loadDuration reads h2load's "156us", "4.54ms", "1.02s".
func parseH2loadDuration(s string) (time.Duration, error) {
	return time.ParseDuration(strings.Replace(s, "us", "µs", 1))
}

func atoiAll(ss []string) []int64 {
	out := make([]int64, len(ss))
	for i, s := range ss {
		out[i], _ = strconv.ParseInt(s, 10, 64)
	}
	return out
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
