package promtest

import (
	"slices"
	"testing"
)

func TestMetricNames(t *testing.T) {
	cases := []struct {
		name string
		expr string
		want []string
	}{
		{"bare selector", `up`, []string{"up"}},
		{"matchers and range", `rate(tradergate_requests_total{route=~".+",code=~"5.."}[5m])`, []string{"tradergate_requests_total"}},
		{"histogram", `histogram_quantile(0.99, sum by (route, le) (rate(tradergate_request_duration_seconds_bucket[1m])))`, []string{"tradergate_request_duration_seconds_bucket"}},
		{"binary, once each, sorted", `sum(rate(b_total[1m])) / sum(rate(a_total[1m])) + sum(rate(b_total[5m]))`, []string{"a_total", "b_total"}},
		{"name as matcher", `{__name__="go_goroutines",job="x"}`, []string{"go_goroutines"}},
		{"name as regexp names none", `{__name__=~"go_.*"}`, []string{}},
		{"offset and subquery", `max_over_time(rate(x_total[1m] offset 1h)[10m:1m])`, []string{"x_total"}},
		{"recorded name", `job_route:tradergate_requests_errors:ratio_rate5m > 0.0144`, []string{"job_route:tradergate_requests_errors:ratio_rate5m"}},
		{"no selector", `time() - 1`, []string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := MetricNames(c.expr)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("MetricNames(%q) = %q, want %q", c.expr, got, c.want)
			}
		})
	}
}

func TestMetricNamesRejectsInvalid(t *testing.T) {
	for _, expr := range []string{
		`rate(x_total[$__rate_interval])`,
		`label_values(tradergate_requests_total, route)`,
		`sum by (route) (rate(x_total[5m])`,
	} {
		if names, err := MetricNames(expr); err == nil {
			t.Errorf("MetricNames(%q) = %q, want a parse error", expr, names)
		}
	}
}
