// Package deploy holds what an operator loads next to tradergate: the
// Grafana dashboard (grafana/tradergate.json) and the Prometheus recording
// and alerting rules (prometheus/alerts.yml, unit-tested by
// prometheus/alerts_test.yml). README.md in this folder says how to load
// them and holds the runbooks.
//
// The files are embedded so that tests can check every PromQL expression in
// them against a real Prometheus scraping a real edge: a panel or an alert
// naming a series the edge does not export shows nothing and never fires,
// and nothing else would notice.
package deploy

import (
	_ "embed"
	"fmt"
	"slices"
)

// The chart carries copies of both (Helm warns on every command about a
// link in a chart); TestChartFilesAreCopies fails when they drift.
//go:generate cp grafana/tradergate.json helm/tradergate/files/tradergate.json
//go:generate cp prometheus/alerts.yml helm/tradergate/files/alerts.yml

//go:embed grafana/tradergate.json
var dashboard []byte

//go:embed prometheus/alerts.yml
var rules []byte

// Dashboard is the Grafana dashboard's JSON model, a fresh copy.
func Dashboard() []byte { return slices.Clone(dashboard) }

// Rules is the Prometheus rule file (recording and alerting rules), a fresh
// copy, for a Prometheus started by a test.
func Rules() []byte { return slices.Clone(rules) }

// Expr is one PromQL expression of the dashboard or the rules.
type Expr struct {
	// Source says where it comes from, e.g. `grafana/tradergate.json: panel
	// "Legacy calls per request" (id 12) target A` or `prometheus/alerts.yml: group
	// tradergate-shield alert TradergateBreakerOpen`.
	Source string
	// Query is the expression, with Grafana's template variables replaced
	// (see Expressions), ready for /api/v1/query.
	Query string
}

// Expressions returns every PromQL expression of the dashboard (panel
// targets, and the metric a template variable takes its values from) and of
// the rule file (recording and alerting rules), in file order.
//
// Dashboard queries are written for Grafana, so its variables are replaced
// by values that keep the query valid and as wide as the dashboard's "All":
// $route by the regular expression .+ (the variable's allValue), and
// $__rate_interval and $__interval by 1m, which holds at least four scrapes
// at the usual 15s interval; $__range becomes 1h.
func Expressions() ([]Expr, error) {
	dash, err := dashboardExpressions(dashboard)
	if err != nil {
		return nil, fmt.Errorf("grafana/tradergate.json: %w", err)
	}
	rs, err := ruleExpressions(rules)
	if err != nil {
		return nil, fmt.Errorf("prometheus/alerts.yml: %w", err)
	}
	return append(dash, rs...), nil
}

// Recorded returns the names the recording rules record, for telling apart
// in a test a series the edge must export from one Prometheus makes.
func Recorded() ([]string, error) {
	groups, err := parseRules(rules)
	if err != nil {
		return nil, fmt.Errorf("prometheus/alerts.yml: %w", err)
	}
	var names []string
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				names = append(names, r.Record)
			}
		}
	}
	return names, nil
}
