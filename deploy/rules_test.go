package deploy

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"tradergate/internal/testkit"
)

// promtool runs promtool with args in dir prometheus/ and returns its
// output. Without promtool the test skips, or fails when CI is set.
func promtool(t *testing.T, args ...string) string {
	t.Helper()
	bin := testkit.Binary(t, "prometheus", "promtool")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = "prometheus"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestPromtoolCheckRules(t *testing.T) {
	t.Parallel()
	promtool(t, "check", "rules", "alerts.yml")
}

func TestPromtoolTestRules(t *testing.T) {
	t.Parallel()
	promtool(t, "test", "rules", "alerts_test.yml")
}

type alertRule struct {
	Alert       string            `yaml:"alert"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func alertRules(t *testing.T) []alertRule {
	t.Helper()
	var f struct {
		Groups []struct {
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(Rules(), &f); err != nil {
		t.Fatal(err)
	}
	var out []alertRule
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no alerts in the rule file")
	}
	return out
}

// TestAlertsPointAtTheirRunbook: each alert has a summary, a severity, and
// a runbook_url whose anchor is a heading of README.md.
func TestAlertsPointAtTheirRunbook(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(readme), -1) {
		anchors[githubAnchor(m[1])] = true
	}
	for _, a := range alertRules(t) {
		if a.Annotations["summary"] == "" {
			t.Errorf("%s has no summary", a.Alert)
		}
		if s := a.Labels["severity"]; s != "page" && s != "ticket" {
			t.Errorf("%s: severity %q, want page or ticket", a.Alert, s)
		}
		url := a.Annotations["runbook_url"]
		want := "deploy/README.md#" + strings.ToLower(a.Alert)
		if url != want {
			t.Errorf("%s: runbook_url %q, want %q", a.Alert, url, want)
		}
		if !anchors[strings.ToLower(a.Alert)] {
			t.Errorf("%s: README.md has no heading %q for its runbook", a.Alert, a.Alert)
		}
		if !strings.Contains(a.Annotations["description"], want) {
			t.Errorf("%s: description does not name its runbook %s", a.Alert, want)
		}
	}
}

// githubAnchor is the anchor GitHub gives a heading: lower case, spaces to
// hyphens, punctuation dropped.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestEveryAlertTestedBothWays: alerts_test.yml has, for every alert, a
// case where it fires and one where it must not.
func TestEveryAlertTestedBothWays(t *testing.T) {
	data, err := os.ReadFile("prometheus/alerts_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, a := range alertRules(t) {
		if !fires[a.Alert] {
			t.Errorf("%s: no test case where it fires", a.Alert)
		}
		if !silent[a.Alert] {
			t.Errorf("%s: no test case where it must not fire", a.Alert)
		}
	}
}
