package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"tradergate/bench/load"
)

// profiles profiles tradergate on the hit path (the 20-item page) and the
// miss path (on a filling and on a full cache), printing the top of each.
// With -only it profiles what was chosen instead: the first hit row (so
// that one page's hit can be profiled alone), the miss rows and the rows
// of a TLS connection per request (the handshake's cost). A hit row
// is profiled on the fasthttp ceiling too, under the same load, so that
// what the edge adds to the bare server can be read off the two side by
// side. A row with the limiter's Redis store is not profiled: the profile
// runs tradergate without Redis.
func (b *bench) profiles(ctx context.Context, w io.Writer, scs, chosen []*scenario) []profileResult {
	names := []string{"hit-activity20", "miss", "miss-full"}
	if b.opt.only != "" {
		names = nil
		hit := false
		for _, sc := range chosen {
			switch {
			case strings.HasPrefix(sc.name, "hit-") && sc.label() == "" && !hit:
				names, hit = append(names, sc.name), true
			case sc.name == "miss" || sc.name == "miss-full" || sc.name == "tls-new-conn" || sc.name == "tls-resumed":
				names = append(names, sc.name)
			}
		}
		if len(names) == 0 {
			fmt.Fprintln(w, "\n== profile: none of the rows chosen with -only is a hit, miss or new-connection row ==")
		}
	}
	var out []profileResult
	for _, name := range names {
		kinds := []serverKind{kindTradergate}
		if strings.HasPrefix(name, "hit-") {
			kinds = append(kinds, kindCeilingFast)
		}
		for _, kind := range kinds {
			fmt.Fprintf(b.stderr, "profiling %s on %s…\n", name, kind)
			text, err := b.profile(ctx, scenarioByName(scs, name), kind)
			p := profileResult{Scenario: name, Server: string(kind), Report: text}
			if err != nil {
				p.Error = err.Error()
			}
			out = append(out, p)
			fmt.Fprintf(w, "\n== profile: %s on %s ==\n%s%s\n", name, kind, p.Error, firstLines(text, 30))
		}
	}
	return out
}

// profile runs a scenario against one server (tradergate, or the fasthttp
// ceiling) once more, outside the table (a profiler perturbs what it
// watches), and captures a CPU profile of its process over the measured
// window. It prefers Go's own profiler where the server serves
// /debug/pprof/profile (tradergate's admin listener, the ceiling's
// -pprof); without that hook it samples the process with `perf record`
// (Go binaries keep frame pointers, so call graphs unwind). The text
// report is written to <out>/profile-<scenario>[-<server>].txt and
// returned.
func (b *bench) profile(ctx context.Context, sc *scenario, kind serverKind) (string, error) {
	tag, bin := "profile-"+sc.name, b.bins.tradergate
	if kind != kindTradergate {
		tag, bin = tag+"-"+string(kind), b.bins.ceiling
	}
	b.procs.setTag(tag)
	defer b.procs.setTag("")
	var srv *server
	var err error
	if kind == kindTradergate {
		srv, err = b.startTradergate(ctx, sc.variant(""))
	} else {
		srv, err = b.startCeilingProfiled(ctx, kind)
	}
	if err != nil {
		return "", err
	}
	defer srv.stop()
	prefix := kind.pathPrefix()
	if sc.mode == load.ModeList {
		if err := b.warm(ctx, sc, kind, srv, prefix); err != nil {
			return "", err
		}
	}
	spec := b.spec(sc, kind, srv, prefix)
	lg, outPath, err := b.startLoad(spec, string(kind))
	if err != nil {
		return "", err
	}
	defer lg.stop(2 * time.Second)
	sleepFor(ctx, spec.Warmup)
	secs := max(1, int((spec.Duration-500*time.Millisecond)/time.Second))
	base := filepath.Join(b.out, tag)

	var report string
	if srv.admin != "" {
		report, err = b.pprofProfile(ctx, srv.admin, secs, base, bin)
	}
	if report == "" {
		var perr error
		report, perr = b.perfProfile(ctx, srv.proc.pid(), secs, base, string(kind))
		if perr != nil {
			return "", fmt.Errorf("no profile: pprof: %v; perf: %w", err, perr)
		}
	}
	if _, err := b.waitLoad(ctx, lg, spec, outPath); err != nil {
		return "", err
	}
	if err := os.WriteFile(base+".txt", []byte(report), 0o644); err != nil {
		return "", err
	}
	return report, nil
}

// pprofProfile fetches a CPU profile from a server's pprof listener (the
// edge's admin listener) and renders it with the server's binary bin. It
// returns "" with no error when the listener has no pprof handler.
func (b *bench) pprofProfile(ctx context.Context, admin string, secs int, base, bin string) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/debug/pprof/profile?seconds="+strconv.Itoa(secs), nil)
	resp, err := (&http.Client{Timeout: time.Duration(secs+30) * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("admin listener: /debug/pprof/profile answered %d", resp.StatusCode)
	}
	f, err := os.Create(base + ".pb.gz")
	if err != nil {
		return "", err
	}
	if _, err := f.ReadFrom(resp.Body); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	flat, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=30", bin, base+".pb.gz").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go tool pprof: %v: %s", err, flat)
	}
	cum, _ := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-cum", "-nodecount=30", bin, base+".pb.gz").CombinedOutput()
	return "source: Go pprof from the server's pprof listener (" + base + ".pb.gz)\n\n== flat ==\n" + string(flat) + "\n== cumulative ==\n" + string(cum), nil
}

// perfProfile samples the process with perf (the cpu-clock software
// event, which works where hardware counters are not exposed) for secs
// seconds and renders flat and cumulative tops by symbol. perf itself runs
// on the load generator's CPU.
func (b *bench) perfProfile(ctx context.Context, pid, secs int, base, server string) (string, error) {
	perf := lookPath("perf")
	if perf == "" {
		return "", fmt.Errorf("perf is not installed (Debian: linux-perf)")
	}
	data := base + ".perf.data"
	rec := exec.CommandContext(ctx, "taskset", "-c", strconv.Itoa(b.opt.loadCPU), perf, "record", "-e", "cpu-clock", "-F", "1999", "-g",
		"-p", strconv.Itoa(pid), "-o", data, "--", "sleep", strconv.Itoa(secs))
	if out, err := rec.CombinedOutput(); err != nil {
		return "", fmt.Errorf("perf record: %v: %s", err, strings.TrimSpace(string(out)))
	}
	report := func(n int, args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, perf, append([]string{"report", "-i", data, "--stdio", "-g", "none"}, args...)...).Output()
		return keepReportLines(string(out), n), err
	}
	// Kernel time is a large share on loopback; a VM's cpu-clock samples
	// of it often land on the point where interrupts are re-enabled
	// (pvm_irq_enable and the like), so the split by object comes first.
	split, err := report(10, "--no-children", "--sort", "dso")
	if err != nil {
		return "", fmt.Errorf("perf report: %w", err)
	}
	flat, _ := report(35, "--no-children", "--sort", "dso,symbol")
	cum, _ := report(70, "--children", "--sort", "symbol")
	return "source: perf record -e cpu-clock -F 1999 -g on the " + server + " process (" + data + ")\n\n== by object ==\n" + split +
		"\n== flat (self) ==\n" + flat + "\n== cumulative (children) ==\n" + cum, nil
}

// keepReportLines drops perf's comment header and keeps the first n
// sample lines, without the trailing IPC columns perf prints as "-".
func keepReportLines(s string, n int) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		line = strings.TrimRight(line, " -")
		out = append(out, line)
		if len(out) == n {
			break
		}
	}
	return strings.Join(out, "\n") + "\n"
}

// sleepFor sleeps for d or until ctx ends.
func sleepFor(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
