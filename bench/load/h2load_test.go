package load

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The samples are h2load 1.52's output for a timed run (-D with
// --warm-up-time) against a loopback TLS server: over HTTP/2, and over
// HTTPS/1.1 with every other request answered 404.
func readSample(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestParseH2load(t *testing.T) {
	res, err := ParseH2load(readSample(t, "h2load-h2.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 94932 || res.Errors != 0 || res.TransportErrors != 0 || res.RPS != 47466 || res.Protocol != "h2" {
		t.Fatalf("h2: %+v", res)
	}
	if res.Latency.Mean != 777*time.Microsecond || res.Latency.Max != 8200*time.Microsecond || res.Status[200] != 94932 || len(res.Status) != 1 {
		t.Fatalf("h2 latency %+v, status %v", res.Latency, res.Status)
	}
	if res.BodyBytes != 0 {
		t.Fatalf("body bytes %d: h2load's data figure spans the warm-up, it must not be read", res.BodyBytes)
	}

	res, err = ParseH2load(readSample(t, "h2load-h1-404.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// 79705 done in 2s, of which 39852 were 200s: the 404s are errors,
	// counted once, and not in the row's rate.
	if res.Requests != 39852 || res.Errors != 39853 || res.Status[400] != 39853 || res.Protocol != "http/1.1" {
		t.Fatalf("h1: %+v", res)
	}
	if res.RPS < 19925.9 || res.RPS > 19926.1 {
		t.Fatalf("h1 req/s %v, want the 2xx answers' 19926", res.RPS)
	}
}

func TestParseH2loadRefusesOtherOutput(t *testing.T) {
	full := readSample(t, "h2load-h2.txt")
	for name, text := range map[string]string{
		"empty":       "",
		"no requests": strings.Replace(full, "requests: ", "reqs: ", 1),
		"no status":   strings.Replace(full, "status codes: ", "codes: ", 1),
		"no finished": strings.Replace(full, "finished in", "done in", 1),
	} {
		if _, err := ParseH2load(text); err == nil || !strings.Contains(err.Error(), "h2load: no") {
			t.Errorf("%s: err = %v, want a missing-line error", name, err)
		}
	}
}

// TestRunH2loadPhases runs a stand-in for h2load that prints the sample
// with its phase lines, and checks the run reads its figures and times
// its window between them.
func TestRunH2loadPhases(t *testing.T) {
	sample := filepath.Join(t.TempDir(), "out.txt")
	if err := os.WriteFile(sample, []byte(readSample(t, "h2load-h2.txt")), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Spec{
		Addr: "127.0.0.1:1", Mode: ModeH2load, Command: []string{"cat", sample}, Duration: time.Second,
		Warmup: time.Second, ServerCPU: -1, LoadCPU: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 94932 || len(res.Problems) != 0 || res.Window < 0 {
		t.Fatalf("%+v", res)
	}

	_, err = Run(context.Background(), Spec{Addr: "127.0.0.1:1", Mode: ModeH2load, Command: []string{"false"}, Duration: time.Second, ServerCPU: -1, LoadCPU: -1})
	if err == nil || !strings.Contains(err.Error(), "h2load") {
		t.Fatalf("a failing h2load: err = %v", err)
	}
	if _, err := Run(context.Background(), Spec{Addr: "127.0.0.1:1", Mode: ModeH2load, Duration: time.Second}); err == nil {
		t.Fatal("no command accepted")
	}
}

func TestParseCommandStats(t *testing.T) {
	text := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=1200,usec=9000,usec_per_call=7.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_get:calls=21,usec=175,usec_per_call=8.33,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_client|setinfo:calls=4,usec=3,usec_per_call=0.75,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=3,usec=300,usec_per_call=100.00,rejected_calls=0,failed_calls=0\r\n"
	before, err := ParseCommandStats(text)
	if err != nil {
		t.Fatal(err)
	}
	if before["evalsha"] != 1200 || before["get"] != 21 || before["client|setinfo"] != 4 || len(before) != 4 {
		t.Fatalf("parsed %v", before)
	}
	after := map[string]int64{"evalsha": 2200, "get": 21, "client|setinfo": 4, "info": 4, "set": 7}
	d := RedisDelta(before, after)
	if len(d) != 2 || d["evalsha"] != 1000 || d["set"] != 7 {
		t.Fatalf("delta %v: want evalsha and set alone (info is the harness's, get did not move)", d)
	}
	for _, bad := range []string{"cmdstat_get:usec=1", "cmdstat_get:calls=x,usec=1", "cmdstat_get:calls=-1"} {
		if _, err := ParseCommandStats(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
