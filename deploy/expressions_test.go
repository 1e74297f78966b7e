package deploy

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"

	"tradergate/internal/testkit/promtest"
)

// exported is every metric the edge exports, with its labels (job and
// instance come from Prometheus). The live-edge test checks the same
// against a running edge; this one fails fast, without a server.
var exported = map[string][]string{
	"tradergate_requests_total":                               {"route", "code", "cache"},
	"tradergate_request_duration_seconds_bucket":              {"route", "cache", "le"},
	"tradergate_request_duration_seconds_count":               {"route", "cache"},
	"tradergate_request_duration_seconds_sum":                 {"route", "cache"},
	"tradergate_upstream_requests_total":                      {"route", "code"},
	"tradergate_upstream_duration_seconds_bucket":             {"route", "le"},
	"tradergate_upstream_duration_seconds_count":              {"route"},
	"tradergate_upstream_duration_seconds_sum":                {"route"},
	"tradergate_ratelimit_refused_total":                      {"plan"},
	"tradergate_breaker_state":                                {"route"},
	"tradergate_breaker_transitions_total":                    {"route", "to"},
	"tradergate_cache_requests_total":                         {"result"},
	"tradergate_cache_coalesced_total":                        nil,
	"tradergate_cache_fetches_total":                          nil,
	"tradergate_cache_evictions_total":                        nil,
	"tradergate_cache_rejected_total":                         nil,
	"tradergate_cache_entries":                                nil,
	"tradergate_cache_bytes":                                  nil,
	"tradergate_cache_files":                                  nil,
	"tradergate_cache_file_bytes":                             nil,
	"tradergate_cache_flight_runners":                         nil,
	"tradergate_cache_max_bytes":                              nil,
	"tradergate_ratelimit_store_errors_total":                 nil,
	"tradergate_upstream_retries_total":                       nil,
	"tradergate_upstream_retry_budget_refused_total":          nil,
	"tradergate_upstream_in_flight":                           nil,
	"tradergate_upstream_max_concurrent":                      nil,
	"tradergate_client_connections":                           nil,
	"tradergate_client_connections_max":                       nil,
	"tradergate_client_connection_waits_total":                nil,
	"tradergate_client_connection_wait_seconds_total":         nil,
	"tradergate_client_connections_refused_total":             nil,
	"tradergate_client_lingering_closes_total":                {"end"},
	"tradergate_accept_errors_total":                          {"listener", "reason"},
	"tradergate_h2_connections_closed_total":                  {"reason"},
	"tradergate_h2_streams_cut_total":                         {"reason"},
	"tradergate_h2_memory_returns_total":                      nil,
	"tradergate_h2_runners":                                   nil,
	"tradergate_build_info":                                   {"version", "revision", "goversion"},
	"tradergate_ready":                                        nil,
	"tradergate_config_last_reload_successful":                nil,
	"tradergate_config_last_reload_success_timestamp_seconds": nil,
	"tradergate_tls_certificate_expiry_timestamp_seconds":     {"name"},
	"tradergate_redis_breaker_state":                          nil,
	"tradergate_l2_requests_total":                            {"result"},
	"tradergate_native_requests_total":                        {"route", "result"},
	"tradergate_native_comparisons_total":                     {"route", "outcome"},
	"tradergate_native_rolled_back":                           {"route"},
	"tradergate_native_shadow_dropped_total":                  {"route"},
	"tradergate_stream_open":                                  {"route"},
	"tradergate_stream_subscribers_max":                       {"route"},
	"tradergate_stream_polls_total":                           {"route"},
	"tradergate_stream_page_reads_total":                      {"route"},
	"tradergate_stream_legacy_calls_total":                    {"route"},
	"tradergate_stream_events_total":                          {"route"},
	"tradergate_stream_ended_total":                           {"route", "reason"},
	"tradergate_stream_delivery_lag_seconds_bucket":           {"route", "le"},
	"tradergate_stream_leases_taken_total":                    {"route"},
	"tradergate_stream_relay_gaps_total":                      {"route"},
	"tradergate_stream_read_errors_total":                     {"route"},
	"go_goroutines":                                           nil,
	"go_sched_latencies_seconds_bucket":                       {"le"},
	"process_resident_memory_bytes":                           nil,
}

func TestExpressionsCoverEveryQuery(t *testing.T) {
	exprs, err := Expressions()
	if err != nil {
		t.Fatal(err)
	}
	var dash, rs, vars int
	for _, e := range exprs {
		switch {
		case strings.HasPrefix(e.Source, "grafana/tradergate.json: variable "):
			vars++
		case strings.HasPrefix(e.Source, "grafana/tradergate.json: panel "):
			dash++
		case strings.HasPrefix(e.Source, "prometheus/alerts.yml: "):
			rs++
		default:
			t.Errorf("expression from an unknown source %q", e.Source)
		}
	}
	// Counted here without the package's types: an "expr" anywhere in the
	// dashboard, any rule with an expr in the rule file.
	var anyJSON any
	if err := json.Unmarshal(Dashboard(), &anyJSON); err != nil {
		t.Fatal(err)
	}
	if want := countKey(anyJSON, "expr"); dash != want {
		t.Errorf("Expressions has %d dashboard queries, the dashboard %d", dash, want)
	}
	var anyYAML any
	if err := yaml.Unmarshal(Rules(), &anyYAML); err != nil {
		t.Fatal(err)
	}
	if want := countKey(anyYAML, "expr"); rs != want {
		t.Errorf("Expressions has %d rule expressions, the rule file %d", rs, want)
	}
	if vars != 1 {
		t.Errorf("Expressions has %d template variable queries, want 1 (route)", vars)
	}
	if dash < 40 {
		t.Errorf("only %d dashboard queries", dash)
	}
}

func countKey(v any, key string) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if k == key {
				n++
			}
			n += countKey(x, key)
		}
	case []any:
		for _, x := range v {
			n += countKey(x, key)
		}
	}
	return n
}

// TestExpressionsUseExportedSeries parses every expression with
// Prometheus's parser and checks that each selector names a metric the
// edge exports (or one the rules record) and matches only on its labels: a
// typo there makes a panel empty or an alert that never fires.
func TestExpressionsUseExportedSeries(t *testing.T) {
	exprs, err := Expressions()
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := Recorded()
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, e := range exprs {
		if strings.Contains(e.Query, "$") || strings.Contains(e.Query, "[[") {
			t.Errorf("%s: a template variable is left: %s", e.Source, e.Query)
		}
		names, err := promtest.MetricNames(e.Query)
		if err != nil {
			t.Errorf("%s: %v", e.Source, err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s names no metric: %s", e.Source, e.Query)
		}
		ast, err := parser.NewParser(parser.Options{}).ParseExpr(e.Query)
		if err != nil {
			t.Errorf("%s: %v", e.Source, err)
			continue
		}
		parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
			vs, ok := n.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			used[vs.Name] = true
			known, ok := exported[vs.Name]
			if !ok {
				if !slices.Contains(recorded, vs.Name) {
					t.Errorf("%s: %s is neither exported by the edge nor recorded", e.Source, vs.Name)
				}
				known = []string{"route"} // what the recorded series keep besides job
			}
			for _, m := range vs.LabelMatchers {
				if m.Name == labels.MetricName || m.Name == "job" || m.Name == "instance" {
					continue
				}
				if !slices.Contains(known, m.Name) {
					t.Errorf("%s: %s has no label %q", e.Source, vs.Name, m.Name)
				}
			}
			return nil
		})
	}
	// Every concern of the dashboard has its series: a metric of the edge
	// that nothing uses is a gap in what operators see.
	for name := range exported {
		if strings.HasSuffix(name, "_sum") || strings.HasSuffix(name, "_count") && name != "tradergate_request_duration_seconds_count" {
			continue
		}
		if !used[name] {
			t.Errorf("no panel or rule uses %s", name)
		}
	}
}
