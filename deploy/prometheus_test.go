package deploy

import (
	"context"
	"strings"
	"testing"
	"time"

	"tradergate/internal/testkit/promtest"
)

// TestPrometheusRunsEveryExpression loads the rule file into the real
// Prometheus installed here and has it evaluate every expression: the Go
// parser of the tests may accept syntax an older server does not. Nothing
// is scraped, so results are empty; the live-edge test checks the series.
func TestPrometheusRunsEveryExpression(t *testing.T) {
	t.Parallel()
	exprs, err := Expressions()
	if err != nil {
		t.Fatal(err)
	}
	srv := promtest.Start(t, nil, promtest.WithRules(Rules()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rules, err := srv.API().Rules(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range rules.Groups {
		n += len(g.Rules)
	}
	if want := len(exprs) - countPanelExprs(exprs); n != want {
		t.Errorf("Prometheus loaded %d rules, the file has %d", n, want)
	}
	for _, e := range exprs {
		if _, err := srv.Query(ctx, e.Query); err != nil {
			t.Errorf("%s: %v", e.Source, err)
		}
	}
}

func countPanelExprs(exprs []Expr) int {
	n := 0
	for _, e := range exprs {
		if strings.HasPrefix(e.Source, "grafana/") {
			n++
		}
	}
	return n
}
