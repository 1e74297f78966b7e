package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// grafanaDashboard is the part of Grafana's JSON model that holds queries.
type grafanaDashboard struct {
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []grafanaVariable `json:"list"`
	} `json:"templating"`
}

type grafanaPanel struct {
	ID      int             `json:"id"`
	Type    string          `json:"type"`
	Title   string          `json:"title"`
	Targets []grafanaTarget `json:"targets"`
	// Panels are those a collapsed row holds.
	Panels []grafanaPanel `json:"panels"`
}

type grafanaTarget struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
}

type grafanaVariable struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Query is a string in older models, {"query": "..."} in newer ones.
	Query json.RawMessage `json:"query"`
}

// templateValue is what Expressions puts for a Grafana variable.
func templateValue(name string) (string, bool) {
	switch name {
	case "route":
		return ".+", true
	case "__rate_interval", "__interval":
		return "1m", true
	case "__range":
		return "1h", true
	}
	return "", false
}

// grafanaVar matches $name, ${name}, ${name:format} and [[name]].
var grafanaVar = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]`)

// labelValues matches label_values(metric, label), whose metric part is a
// PromQL selector; label_values(label) alone names no series.
var labelValues = regexp.MustCompile(`^\s*label_values\(\s*(.+)\s*,\s*\w+\s*\)\s*$`)

func dashboardExpressions(data []byte) ([]Expr, error) {
	var d grafanaDashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	var out []Expr
	var errs []error
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, err := variableQuery(v.Query)
		if err != nil {
			errs = append(errs, fmt.Errorf("variable %s: %w", v.Name, err))
			continue
		}
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			continue
		}
		out = append(out, Expr{
			Source: fmt.Sprintf("grafana/tradergate.json: variable %s", v.Name),
			Query:  m[1],
		})
	}
	var walk func([]grafanaPanel)
	walk = func(panels []grafanaPanel) {
		for _, p := range panels {
			walk(p.Panels)
			for _, t := range p.Targets {
				src := fmt.Sprintf("grafana/tradergate.json: panel %q (id %d) target %s", p.Title, p.ID, t.RefID)
				q, err := substitute(t.Expr)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", src, err))
					continue
				}
				out = append(out, Expr{Source: src, Query: q})
			}
		}
	}
	walk(d.Panels)
	return out, errors.Join(errs...)
}

func variableQuery(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var o struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return "", fmt.Errorf("query is neither a string nor {\"query\": ...}: %w", err)
	}
	return o.Query, nil
}

// substitute replaces Grafana's variables in a panel query. A variable it
// does not know is an error, not left in place: the query would not parse,
// and a new variable must get a value here.
func substitute(expr string) (string, error) {
	var unknown []string
	q := grafanaVar.ReplaceAllStringFunc(expr, func(m string) string {
		sm := grafanaVar.FindStringSubmatch(m)
		name := sm[1] + sm[2] + sm[3]
		v, ok := templateValue(name)
		if !ok {
			unknown = append(unknown, m)
			return m
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown template variables %s in %q", strings.Join(unknown, ", "), expr)
	}
	return q, nil
}
