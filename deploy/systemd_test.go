package deploy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tradergate/internal/testkit"
	"tradergate/proxy/config"
)

const unitFile = "systemd/tradergate.service"

// unitBinary is where the unit runs tradergate from.
const unitBinary = "/usr/local/bin/tradergate"

// unitConfig is the configuration file the unit names.
const unitConfig = "/etc/tradergate/config.yaml"

// unitDirectives reads a unit file into its [Service] (and other
// sections') directives, each key with its values in order.
func unitDirectives(t *testing.T, data []byte) map[string][]string {
	t.Helper()
	d := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not key=value: %q", unitFile, line)
		}
		d[k] = append(d[k], v)
	}
	return d
}

// buildEdge builds tradergate into a folder of the test's.
func buildEdge(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not on PATH: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "tradergate")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "tradergate")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestSystemdUnit: the unit says what an operator relies on, in the
// terms of the configuration it runs.
func TestSystemdUnit(t *testing.T) {
	data, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	d := unitDirectives(t, data)
	want := map[string][]string{
		"ExecStartPre":           {unitBinary + " check -config " + unitConfig},
		"ExecStart":              {unitBinary + " -config " + unitConfig},
		"ExecReload":             {unitBinary + " check -config " + unitConfig, "/bin/kill -HUP $MAINPID"},
		"DynamicUser":            {"yes"},
		"ProtectSystem":          {"strict"},
		"ProtectHome":            {"yes"},
		"PrivateTmp":             {"yes"},
		"PrivateDevices":         {"yes"},
		"NoNewPrivileges":        {"yes"},
		"CapabilityBoundingSet":  {"CAP_NET_BIND_SERVICE"},
		"AmbientCapabilities":    {"CAP_NET_BIND_SERVICE"},
		"Restart":                {"on-failure"},
		"EnvironmentFile":        {"/etc/tradergate/env"},
		"ProtectKernelTunables":  {"yes"},
		"ProtectControlGroups":   {"yes"},
		"RestrictSUIDSGID":       {"yes"},
		"MemoryDenyWriteExecute": {"yes"},
	}
	for k, v := range want {
		if got := d[k]; !slices.Equal(got, v) {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}

	// Sized and timed for the configuration shipped in config.yaml.
	shipped, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(shipped)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d["MemoryMax"], []string{fmt.Sprintf("%dM", replicaMemory(cfg.Cache.MaxBytes)>>20)}; !slices.Equal(got, want) {
		t.Errorf("MemoryMax = %q, want %q: 1.5 x cache.max_bytes (%d) + 64 MiB", got, want, cfg.Cache.MaxBytes)
	}
	stop, err := time.ParseDuration(strings.Join(d["TimeoutStopSec"], ""))
	if err != nil {
		t.Fatalf("TimeoutStopSec: %v", err)
	}
	if drain := cfg.Server.DrainDelay + cfg.Server.ShutdownTimeout; stop <= drain {
		t.Errorf("TimeoutStopSec %v does not leave the drain (drain_delay + shutdown_timeout = %v) to finish", stop, drain)
	}
}

// TestSystemdAnalyzeVerify runs Debian's systemd-analyze on the unit, with
// tradergate built where a copy of the unit points (verify wants every
// command it names to exist), then the unit's reload command line on a
// good and a bad configuration.
func TestSystemdAnalyzeVerify(t *testing.T) {
	analyze := testkit.Binary(t, "systemd", "systemd-analyze")
	data, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	bin := buildEdge(t)
	dir := t.TempDir()
	unit := filepath.Join(dir, "tradergate.service")
	if err := os.WriteFile(unit, bytes.ReplaceAll(data, []byte(unitBinary), []byte(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"verify", unit},
		// systemd's exposure score of the hardening, 0 (locked down) to
		// 100 (shown as 10.0): past 20 a directive has been lost.
		{"security", "--offline=yes", "--threshold=20", unit},
	} {
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, analyze, args...)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		// verify reports an unknown directive on stderr and still exits 0.
		if err != nil || stderr.Len() > 0 {
			t.Errorf("systemd-analyze %s: %v\n%s%s", args[0], err, stderr.String(), tail(string(out)))
		}
	}

	// ExecReload's first command, run as systemd runs it: a file that
	// loads lets the reload go on to SIGHUP, one that does not stops it.
	d := unitDirectives(t, data)
	reload := strings.Fields(d["ExecReload"][0])
	shipped, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	good := strings.Replace(string(shipped), "keys: []\n", ciKeys, 1)
	for _, tc := range []struct {
		name, file string
		ok         bool
	}{
		{"good", good, true},
		{"bad", strings.Replace(good, "level: info", "level: loud", 1), false},
	} {
		path := filepath.Join(dir, tc.name+".yaml")
		if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		args := strings.Split(strings.ReplaceAll(strings.Join(reload[1:], "\x00"), unitConfig, path), "\x00")
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = []string{"TRADERGATE_UPSTREAM_KEY=reload-test-key"}
		out, err := cmd.CombinedOutput()
		if (err == nil) != tc.ok {
			t.Errorf("%s: %s: %v\n%s", tc.name, strings.Join(args, " "), err, out)
		}
		if strings.Contains(string(out), "reload-test-key") {
			t.Errorf("%s: the check printed the key's value:\n%s", tc.name, out)
		}
	}
}

func tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}
