package proxy_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// HTTP/2 conformance of the TLS listener, checked by h2spec, a suite we did
// not write (https://github.com/summerwind/h2spec). Like Pebble
// (pebble_test.go), h2spec is built from the Go module proxy at a pinned
// version, outside this module, and cached in the user cache folder; without
// a Go toolchain or the module proxy the test skips, except under CI=1,
// where it fails.

const (
	h2specModule  = "github.com/summerwind/h2spec"
	h2specVersion = "v2.2.1+incompatible"
	// h2specCases is how many cases v2.2.1 has; the edge passes all of
	// them.
	h2specCases = 145
)

// h2specDeps pin h2spec's dependencies: v2.2.1 predates modules (it has no
// go.mod), so `go install h2spec@v2.2.1` would take whatever is newest of
// each on the day. x/net is the version this module uses.
var h2specDeps = []string{
	"github.com/spf13/cobra v1.10.2",
	"github.com/fatih/color v1.19.0",
	"golang.org/x/net v0.62.0",
}

var installH2specOnce = sync.OnceValues(installH2spec)

// h2specBinary returns h2spec's path, building it on first use.
func h2specBinary(t *testing.T) string {
	t.Helper()
	bin, err := installH2specOnce()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("h2spec %s: %v (CI is set: the conformance test must run)", h2specVersion, err)
		}
		t.Skipf("skipping the HTTP/2 conformance test: h2spec %s could not be built (%v); it runs, and must pass, with CI=1", h2specVersion, err)
	}
	return bin
}

func installH2spec() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "tradergate-test", "h2spec-"+h2specVersion+"-"+runtime.GOOS+"-"+runtime.GOARCH)
	bin := filepath.Join(dir, "h2spec")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin, nil
	}
	goBin, err := exec.LookPath("go") // go test puts its own toolchain first on PATH
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// A throwaway module that requires h2spec and the pinned versions,
	// built in a private folder, then renamed into place, so that a
	// concurrent run never sees half a binary.
	work, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	gomod := "module h2specbuild\n\ngo 1.22\n\nrequire (\n\t" + h2specModule + " " + h2specVersion + "\n\t" +
		strings.Join(h2specDeps, "\n\t") + "\n)\n"
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte(gomod), 0o644); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// -mod=mod fills in go.sum (checked against the checksum database) and
	// the indirect dependencies, which the pinned ones fix. GOFLAGS and
	// go.work of the caller are left out.
	cmd := exec.CommandContext(ctx, goBin, "build", "-mod=mod", "-o", filepath.Join(work, "h2spec"), h2specModule+"/cmd/h2spec")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off", "GO111MODULE=on")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v: %s", err, bytes.TrimSpace(out))
	}
	if err := os.Rename(filepath.Join(work, "h2spec"), bin); err != nil {
		return "", err
	}
	return bin, nil
}

// junitReport is the part of h2spec's JUnit report the test reads: a
// testsuite per section, a testcase per case, in h2spec's order.
type junitReport struct {
	Suites []struct {
		Package string `xml:"package,attr"` // "http2/6.5.3"
		Cases   []struct {
			Desc string `xml:"classname,attr"`
			// h2spec v2.2.1 writes its failures as errors (its reporter's
			// type switch misses *TestError); either is a failure.
			Failure *junitText `xml:"failure"`
			Error   *junitText `xml:"error"`
			Skipped *junitText `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

type junitText struct {
	Text string `xml:",chardata"`
}

// h2specCase is one case's outcome.
type h2specCase struct {
	id, desc, message string
	failed, skipped   bool
}

// parseH2specReport lists the cases of a report, named as h2spec names
// them on its console: the section and the case's number in it.
func parseH2specReport(data []byte) ([]h2specCase, error) {
	var r junitReport
	if err := xml.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	var cases []h2specCase
	for _, s := range r.Suites {
		for i, c := range s.Cases {
			hc := h2specCase{id: fmt.Sprintf("%s/%d", s.Package, i+1), desc: c.Desc, skipped: c.Skipped != nil}
			for _, f := range []*junitText{c.Failure, c.Error} {
				if f != nil {
					hc.failed = true
					hc.message = h2specMessage(f.Text)
				}
			}
			cases = append(cases, hc)
		}
	}
	return cases, nil
}

// h2specRun runs h2spec against addr with args added (sections to run,
// options) and returns the cases of its report.
func h2specRun(t *testing.T, bin, addr string, args ...string) (cases []h2specCase, output []byte) {
	t.Helper()
	report := filepath.Join(t.TempDir(), "h2spec.xml")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// -t -k: TLS, on a self-signed certificate. -o 2: a case waiting for
	// an answer gives up after 2s. Not 1: x/net/http2 closes a connection
	// 1s after its GOAWAY (goAwayTimeout), and a case that waits for the
	// close (5.1/12) then races h2spec's clock.
	args = append([]string{"-h", "127.0.0.1", "-p", port(t, addr), "-t", "-k", "-o", "2", "-j", report}, args...)
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	// h2spec exits 1 when a case fails; the report says which.
	data, rerr := os.ReadFile(report)
	if rerr != nil {
		t.Fatalf("h2spec %s wrote no report (%v): %v\n%s", strings.Join(args, " "), err, rerr, out)
	}
	cases, err = parseH2specReport(data)
	if err != nil {
		t.Fatalf("h2spec's report: %v\n%s", err, data)
	}
	return cases, out
}

// h2specMessage makes h2spec's failure text, the expected answers a line
// each and then the actual one, readable.
func h2specMessage(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) < 2 {
		return text
	}
	return "expected " + strings.Join(lines[:len(lines)-1], " or ") + "; got " + lines[len(lines)-1]
}

// TestH2Spec runs h2spec's whole suite against the TLS listener: every one
// of its h2specCases cases passes, none fails, and the edge still serves a
// request after the broken connections the suite leaves.
func TestH2Spec(t *testing.T) {
	bin := h2specBinary(t)
	te, first, _, _ := filesEdge(t, `http_listen: ""`)
	cases, out := h2specRun(t, bin, te.addr)
	var passed, skipped int
	for _, c := range cases {
		switch {
		case c.skipped:
			skipped++
		case c.failed:
			t.Errorf("h2spec %s %q failed:\n%s", c.id, c.desc, c.message)
		default:
			passed++
		}
	}
	t.Logf("h2spec %s: %d passed, %d failed, %d skipped of %d cases", h2specVersion, passed, len(cases)-passed-skipped, skipped, len(cases))
	if passed < h2specCases {
		t.Errorf("%d cases passed, want all %d", passed, h2specCases)
	}

	// A hundred and fifty broken connections later, the edge still serves.
	resp, body := te.getTLS(t, httpsClient(t, first.Pool(), edgeName), "/v1/tx/"+te.sim.TradeTxs()[0], nil)
	if resp.StatusCode != 200 {
		t.Errorf("after h2spec: status %d: %s", resp.StatusCode, body)
	}
	checkTLS(t, resp, first.Leaf)
	if t.Failed() {
		t.Logf("h2spec's output:\n%s", out)
	}
}
