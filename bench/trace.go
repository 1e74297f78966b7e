package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/exp/trace"

	"tradergate/bench/load"
)

// traceRow runs a fixed-rate row or a plain hit row (-trace) once more on
// tradergate, outside
// the table (tracing costs the server a little), under a Go execution
// trace of its window taken from the edge's pprof listener, keeping every
// answer's due time and latency; then lays the slowest answers beside what
// the runtime did while they waited (analyzeTrace). The trace is kept in
// <out>/trace-<row>.out for `go tool trace`.
func (b *bench) traceRow(ctx context.Context, w io.Writer, scs []*scenario, rows []row) profileResult {
	name := b.opt.trace
	p := profileResult{Scenario: name, Server: string(kindTradergate)}
	fmt.Fprintf(b.stderr, "tracing %s on tradergate…\n", name)
	text, err := b.traceRun(ctx, scenarioByName(scs, name))
	p.Report = text
	if err != nil {
		p.Error = err.Error()
	}
	fmt.Fprintf(w, "\n== trace: %s on tradergate ==\n%s%s\n", name, p.Error, text)
	return p
}

// tracedMisses are the miss rows -trace takes besides the list rows: a
// miss's answer waits on the legacy host as well as on the edge, and the
// trace says which of the edge's waits the slowest ones spent longest in.
var tracedMisses = []string{"miss", "miss-full"}

func (b *bench) traceRun(ctx context.Context, sc *scenario) (string, error) {
	if sc == nil || (sc.mode != load.ModeList && !slices.Contains(tracedMisses, sc.name)) || sc.proto.h2load() || sc.proto == protoGoH2 && sc.rate == nil || !slices.Contains(sc.servers, kindTradergate) {
		return "", errors.New("not a fixed-rate row, a plain hit row or a miss row of tradergate in this run (is it in -only?)")
	}
	var rate float64
	if sc.rate != nil {
		var err error
		if rate, err = b.latencyRate(sc); err != nil {
			return "", err
		}
	}
	tag := "trace-" + sc.name
	b.procs.setTag(tag)
	defer b.procs.setTag("")
	srv, err := b.startTradergate(ctx, sc.variant(""))
	if err != nil {
		return "", err
	}
	defer srv.stop()
	if srv.admin == "" {
		return "", errors.New("this tradergate build serves no admin listener: no trace")
	}
	if err := b.warm(ctx, sc, kindTradergate, srv, ""); err != nil {
		return "", err
	}
	spec := b.spec(sc, kindTradergate, srv, "")
	spec.Rate, spec.KeepAnswers = rate, true
	lg, outPath, err := b.startLoad(spec, string(kindTradergate))
	if err != nil {
		return "", err
	}
	defer lg.stop(2 * time.Second)
	// The load generator's schedule starts about when it has dialled; the
	// trace starts with its warm-up's last half second and runs past the
	// window, so that the window lies inside it.
	sleepFor(ctx, spec.Warmup-500*time.Millisecond)
	path := filepath.Join(b.out, tag+".out")
	secs := (spec.Duration + time.Second).Seconds()
	if err := b.fetchTrace(ctx, srv.admin, secs, path); err != nil {
		return "", err
	}
	res, err := b.waitLoad(ctx, lg, spec, outPath)
	if err != nil {
		return "", err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	facts, err := readTrace(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	text := fmt.Sprintf("source: Go execution trace of tradergate from its pprof listener (%s; go tool trace %s)\n", path, path)
	loop := fmt.Sprintf("open loop at %.0f req/s", rate)
	if rate == 0 {
		loop = fmt.Sprintf("closed loop, %.0f req/s; a request is due when sent", res.RPS)
	}
	text += fmt.Sprintf("row: %s, %s, %d answers, p50 %s, p99 %s, p99.9 %s, max %s\n", sc.name, loop, res.Requests,
		fmtLatency(micros(res.Latency.P50)), fmtLatency(micros(res.Latency.P99)), fmtLatency(micros(res.Latency.P999)), fmtLatency(micros(res.Latency.Max)))
	return text + analyzeTrace(facts, res.WindowStart, res.Answers).String(), nil
}

// fetchTrace saves a Go execution trace of secs seconds from a pprof
// listener.
func (b *bench) fetchTrace(ctx context.Context, admin string, secs float64, path string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/debug/pprof/trace?seconds="+strconv.FormatFloat(secs, 'f', 1, 64), nil)
	resp, err := (&http.Client{Timeout: time.Duration(secs+30) * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("admin listener: /debug/pprof/trace answered %d", resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.ReadFrom(resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// span is an interval of wall-clock time, in nanoseconds since the Unix
// epoch.
type span struct{ from, to int64 }

// wait is a goroutine's time between becoming runnable and running: its
// scheduling latency.
type wait struct {
	span
	gc bool // a GC mark worker
	// by is what made the goroutine runnable (wakeSources).
	by int
}

// What makes a goroutine runnable, as the trace tells it apart. A
// goroutine waiting for the network is found ready by the scheduler's
// poll of the network, which it makes only when it has nothing else to
// run; or, when the P has not polled for 10ms, by sysmon (off any P). Many
// wakeups by sysmon mean the P never ran out of work: answers whose
// requests had arrived waited for it to notice them.
const (
	wakeOther     = iota // created, preempted, yielded
	wakeScheduler        // the scheduler's netpoll, on a P
	wakeSysmon           // sysmon's netpoll, off any P
	wakeGoroutine        // another goroutine (a channel, a lock, a timer)
	wakeSources
)

var wakeNames = [wakeSources]string{"other", "the scheduler's netpoll", "sysmon's netpoll (after 10ms without a poll)", "another goroutine"}

// traceFacts are what a trace says about the intervals that matter to a
// slow answer, on the wall clock (the trace's clock snapshot maps them).
type traceFacts struct {
	mark   []span // GC concurrent mark phases
	stw    []span // stop-the-world pauses, for any reason
	assist []span // mark assists, on any goroutine
	gcRun  []span // GC mark workers running
	busy   []span // a P running
	waits  []wait
	from   int64 // the trace's first and last event
	to     int64
}

// readTrace reads a Go execution trace into traceFacts.
func readTrace(r io.Reader) (*traceFacts, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, err
	}
	var (
		events  []trace.Event
		snap    *trace.ClockSnapshot
		workers = map[trace.GoID]bool{}
	)
	// The clock snapshot comes with the first sync event; events are
	// kept until then, and the trace is small (seconds of one P).
	for {
		ev, err := tr.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if ev.Kind() == trace.EventSync && snap == nil {
			snap = ev.Sync().ClockSnapshot
		}
		if ev.Kind() == trace.EventStateTransition {
			st := ev.StateTransition()
			if st.Resource.Kind == trace.ResourceGoroutine {
				for f := range st.Stack.Frames() {
					if f.Func == "runtime.gcBgMarkWorker" {
						workers[st.Resource.Goroutine()] = true
					}
				}
			}
		}
		events = append(events, ev)
	}
	if snap == nil {
		return nil, errors.New("the trace has no clock snapshot (Go 1.25 or later writes one): its events cannot be put on the wall clock")
	}
	wall := func(t trace.Time) int64 { return snap.Wall.UnixNano() + int64(t-snap.Trace) }
	f := &traceFacts{}
	type rangeKey struct {
		name  string
		scope trace.ResourceID
	}
	open := map[rangeKey]int64{}
	running := map[trace.GoID]int64{}
	type ready struct {
		at int64
		by int
	}
	runnable := map[trace.GoID]ready{}
	procRunning := map[trace.ProcID]int64{}
	for i, ev := range events {
		t := wall(ev.Time())
		if i == 0 {
			f.from = t
		}
		f.to = t
		switch ev.Kind() {
		case trace.EventRangeBegin, trace.EventRangeActive:
			rg := ev.Range()
			open[rangeKey{rangeClass(rg.Name), rg.Scope}] = t
		case trace.EventRangeEnd:
			rg := ev.Range()
			k := rangeKey{rangeClass(rg.Name), rg.Scope}
			from, ok := open[k]
			if !ok {
				from = f.from // began before the trace
			}
			delete(open, k)
			switch k.name {
			case "mark":
				f.mark = append(f.mark, span{from, t})
			case "stw":
				f.stw = append(f.stw, span{from, t})
			case "assist":
				f.assist = append(f.assist, span{from, t})
			}
		case trace.EventStateTransition:
			st := ev.StateTransition()
			switch st.Resource.Kind {
			case trace.ResourceGoroutine:
				id := st.Resource.Goroutine()
				was, to := st.Goroutine()
				if from, ok := running[id]; ok && to != trace.GoRunning {
					delete(running, id)
					if workers[id] {
						f.gcRun = append(f.gcRun, span{from, t})
					}
				}
				switch to {
				case trace.GoRunnable:
					by := wakeOther
					switch {
					case was != trace.GoWaiting:
					case ev.Proc() == trace.NoProc:
						by = wakeSysmon
					case ev.Goroutine() == trace.NoGoroutine:
						by = wakeScheduler
					default:
						by = wakeGoroutine
					}
					runnable[id] = ready{t, by}
				case trace.GoRunning:
					running[id] = t
					if r, ok := runnable[id]; ok {
						f.waits = append(f.waits, wait{span{r.at, t}, workers[id], r.by})
					}
					delete(runnable, id)
				}
			case trace.ResourceProc:
				id := st.Resource.Proc()
				_, to := st.Proc()
				if from, ok := procRunning[id]; ok && to != trace.ProcRunning {
					delete(procRunning, id)
					f.busy = append(f.busy, span{from, t})
				} else if !ok && to == trace.ProcRunning {
					procRunning[id] = t
				}
			}
		}
	}
	// What is still open at the trace's end ends there.
	for k, from := range open {
		switch k.name {
		case "mark":
			f.mark = append(f.mark, span{from, f.to})
		case "stw":
			f.stw = append(f.stw, span{from, f.to})
		case "assist":
			f.assist = append(f.assist, span{from, f.to})
		}
	}
	for id, from := range running {
		if workers[id] {
			f.gcRun = append(f.gcRun, span{from, f.to})
		}
	}
	for _, from := range procRunning {
		f.busy = append(f.busy, span{from, f.to})
	}
	for _, s := range []*[]span{&f.mark, &f.stw, &f.assist, &f.gcRun, &f.busy} {
		*s = mergeSpans(*s)
	}
	slices.SortFunc(f.waits, func(a, b wait) int { return cmp.Compare(a.to, b.to) })
	return f, nil
}

// rangeClass sorts the runtime's range names (x/exp/trace) into what the
// analysis tells apart.
func rangeClass(name string) string {
	switch {
	case name == "GC concurrent mark phase":
		return "mark"
	case strings.HasPrefix(name, "stop-the-world"):
		return "stw"
	case name == "GC mark assist":
		return "assist"
	}
	return name
}

// mergeSpans sorts spans and joins those that overlap, so that overlap
// sums count no time twice.
func mergeSpans(s []span) []span {
	slices.SortFunc(s, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	var out []span
	for _, x := range s {
		if n := len(out); n > 0 && x.from <= out[n-1].to {
			out[n-1].to = max(out[n-1].to, x.to)
			continue
		}
		out = append(out, x)
	}
	return out
}

// overlap is how much of [from, to) the merged spans s cover.
func overlap(s []span, from, to int64) int64 {
	i, _ := slices.BinarySearchFunc(s, from, func(x span, t int64) int { return cmp.Compare(x.to, t) })
	var n int64
	for ; i < len(s) && s[i].from < to; i++ {
		n += max(0, min(s[i].to, to)-max(s[i].from, from))
	}
	return n
}

// answerFacts are what the runtime did while one answer waited.
type answerFacts struct {
	latency   int64 // ns
	mark      bool  // a GC mark phase overlapped it
	stw       int64 // ns of stop-the-world within it
	assist    int64 // ns of mark assists within it
	gcRun     int64 // ns the GC mark workers ran within it
	idle      int64 // ns no P ran within it
	schedWait int64 // the longest scheduling latency that ended within it, ns
	unsent    int64 // ns from due to sent: queued in the load generator
	connWait  int64 // ns of unsent waiting for the connection
}

// answerGroup sums answerFacts over a group of answers.
type answerGroup struct {
	n, mark                           int
	latency, stw, assist, gcRun, idle int64
	unsent, connWait                  int64
	schedWaits                        []int64
	minLatency                        int64
}

func (g *answerGroup) add(a answerFacts) {
	if g.n == 0 || a.latency < g.minLatency {
		g.minLatency = a.latency
	}
	g.n++
	if a.mark {
		g.mark++
	}
	g.latency += a.latency
	g.stw += a.stw
	g.assist += a.assist
	g.gcRun += a.gcRun
	g.idle += a.idle
	g.unsent += a.unsent
	g.connWait += a.connWait
	g.schedWaits = append(g.schedWaits, a.schedWait)
}

// traceReport is analyzeTrace's finding.
type traceReport struct {
	answers, outside int
	slow, all        answerGroup
	markShare        float64 // of the window's time in a GC mark phase
	cycles           int
	markLongest      int64
	stwLongest       int64
	waitP99, waitMax int64 // scheduling latencies in the window
	waitMaxGC        bool
	// wakes are the window's scheduling latencies by what made the
	// goroutine runnable (wakeSources), sorted.
	wakes [wakeSources][]int64
}

// analyzeTrace lays the answers of a fixed-rate window (due µs after
// windowStart, latency µs) over the trace's facts, and compares the
// slowest 1% with all of them.
func analyzeTrace(f *traceFacts, windowStart time.Time, answers [][4]int64) traceReport {
	var rep traceReport
	base := windowStart.UnixNano()
	var facts []answerFacts
	var winFrom, winTo int64 = math.MaxInt64, 0
	for _, a := range answers {
		from := base + a[0]*1000
		to := from + a[1]*1000
		if from < f.from || to > f.to {
			rep.outside++
			continue
		}
		winFrom, winTo = min(winFrom, from), max(winTo, to)
		af := answerFacts{
			latency: to - from, mark: overlap(f.mark, from, to) > 0, stw: overlap(f.stw, from, to),
			assist: overlap(f.assist, from, to), gcRun: overlap(f.gcRun, from, to), idle: (to - from) - overlap(f.busy, from, to),
			unsent: a[2] * 1000, connWait: a[3] * 1000,
		}
		i, _ := slices.BinarySearchFunc(f.waits, from, func(w wait, t int64) int { return cmp.Compare(w.to, t) })
		for ; i < len(f.waits) && f.waits[i].to < to; i++ {
			af.schedWait = max(af.schedWait, f.waits[i].to-f.waits[i].from)
		}
		facts = append(facts, af)
	}
	rep.answers = len(facts)
	if len(facts) == 0 {
		return rep
	}
	slices.SortFunc(facts, func(a, b answerFacts) int { return cmp.Compare(b.latency, a.latency) })
	nSlow := max(1, (len(facts)+99)/100)
	for i, a := range facts {
		rep.all.add(a)
		if i < nSlow {
			rep.slow.add(a)
		}
	}
	rep.markShare = float64(overlap(f.mark, winFrom, winTo)) / float64(winTo-winFrom)
	for _, m := range f.mark {
		if m.to > winFrom && m.from < winTo {
			rep.cycles++
			rep.markLongest = max(rep.markLongest, m.to-m.from)
		}
	}
	for _, s := range f.stw {
		if s.to > winFrom && s.from < winTo {
			rep.stwLongest = max(rep.stwLongest, s.to-s.from)
		}
	}
	var ws []int64
	for _, w := range f.waits {
		if w.to > winFrom && w.from < winTo {
			d := w.to - w.from
			ws = append(ws, d)
			rep.wakes[w.by] = append(rep.wakes[w.by], d)
			if d > rep.waitMax {
				rep.waitMax, rep.waitMaxGC = d, w.gc
			}
		}
	}
	for i := range rep.wakes {
		slices.Sort(rep.wakes[i])
	}
	if len(ws) > 0 {
		slices.Sort(ws)
		rep.waitP99 = ws[min(len(ws)-1, len(ws)*99/100)]
	}
	return rep
}

// String reads the finding as a few lines.
func (r traceReport) String() string {
	if r.answers == 0 {
		return fmt.Sprintf("no answer of the window lies inside the trace (%d outside)\n", r.outside)
	}
	var b strings.Builder
	pct := func(n, d int64) float64 {
		if d == 0 {
			return 0
		}
		return 100 * float64(n) / float64(d)
	}
	us := func(ns int64) string { return fmtLatency(float64(ns) / 1e3) }
	fmt.Fprintf(&b, "window in the trace: %d answers (%d outside it); %d GC cycles, %.1f%% of the time in a mark phase (longest %s), longest stop-the-world %s; goroutine scheduling latency p99 %s, max %s%s\n",
		r.answers, r.outside, r.cycles, 100*r.markShare, us(r.markLongest), us(r.stwLongest), us(r.waitP99), us(r.waitMax), map[bool]string{true: " (a GC worker)", false: ""}[r.waitMaxGC])
	var wakes []string
	for by, ws := range r.wakes {
		if len(ws) == 0 || by == wakeOther {
			continue
		}
		q := func(p float64) string { return us(ws[min(len(ws)-1, int(p*float64(len(ws))))]) }
		wakes = append(wakes, fmt.Sprintf("%d by %s (waited to run p50 %s, p99 %s, max %s)", len(ws), wakeNames[by], q(0.5), q(0.99), us(ws[len(ws)-1])))
	}
	if len(wakes) > 0 {
		fmt.Fprintf(&b, "goroutines made runnable: %s\n", strings.Join(wakes, "; "))
	}
	for _, g := range []struct {
		name string
		g    answerGroup
	}{{fmt.Sprintf("slowest 1%% (%d answers, %s and up)", r.slow.n, us(r.slow.minLatency)), r.slow}, {fmt.Sprintf("all %d answers", r.all.n), r.all}} {
		x := g.g
		slices.Sort(x.schedWaits)
		other := x.latency - x.idle - x.gcRun - x.stw
		fmt.Fprintf(&b, "%s: mean latency %s; %.0f%% overlapped a GC mark phase; of their time waiting, the edge's P ran goroutines other than the GC's (other answers, the runtime's timers and poller) %.1f%% (mark assists in them %.1f%%), GC mark workers %.1f%%, stopped the world %.1f%%, and ran nothing %.1f%% (the edge idle: the request not yet read, in the kernel or not yet sent); %.1f%% of it before the request was sent (%.1f%% waiting for its connection, busy with the answer before or every stream in use, the rest the load generator late); longest scheduling latency within each, median %s, max %s\n",
			g.name, us(x.latency/int64(x.n)), pct(int64(x.mark), int64(x.n)), pct(other, x.latency), pct(x.assist, x.latency), pct(x.gcRun, x.latency), pct(x.stw, x.latency), pct(x.idle, x.latency), pct(x.unsent, x.latency), pct(x.connWait, x.latency),
			us(x.schedWaits[len(x.schedWaits)/2]), us(x.schedWaits[len(x.schedWaits)-1]))
	}
	return b.String()
}
