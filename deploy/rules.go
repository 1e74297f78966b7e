package deploy

import (
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// ruleGroup is the part of a Prometheus rule file that holds expressions;
// promtool check rules validates the rest.
type ruleGroup struct {
	Name  string `yaml:"name"`
	Rules []rule `yaml:"rules"`
}

type rule struct {
	Record      string            `yaml:"record"`
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	Annotations map[string]string `yaml:"annotations"`
}

func parseRules(data []byte) ([]ruleGroup, error) {
	var f struct {
		Groups []ruleGroup `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	if len(f.Groups) == 0 {
		return nil, errors.New("no rule groups")
	}
	return f.Groups, nil
}

func ruleExpressions(data []byte) ([]Expr, error) {
	groups, err := parseRules(data)
	if err != nil {
		return nil, err
	}
	var out []Expr
	for _, g := range groups {
		for i, r := range g.Rules {
			var what string
			switch {
			case r.Alert != "":
				what = "alert " + r.Alert
			case r.Record != "":
				what = "record " + r.Record
			default:
				return nil, fmt.Errorf("group %s rule %d is neither alert nor record", g.Name, i)
			}
			out = append(out, Expr{
				Source: fmt.Sprintf("prometheus/alerts.yml: group %s %s", g.Name, what),
				Query:  r.Expr,
			})
		}
	}
	return out, nil
}
