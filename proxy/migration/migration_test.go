package migration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"tradergate/internal/testkit/redistest"
	"tradergate/proxy/config"
	"tradergate/proxy/fleet"
	"tradergate/proxy/route"
)

// TestMain fails the run if a test leaves a goroutine behind: the flush
// loop must stop on Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testConfig() *config.Config {
	return &config.Config{
		Keys: []config.KeyConfig{{ID: "a"}, {ID: "b", Legacy: config.LegacyRetired}},
		Legacy: config.LegacyConfig{Enabled: true, Deprecation: "2027-01-01T00:00:00Z",
			Sunset: "2027-06-01T00:00:00Z", GuideURL: "https://example.com/guide"},
	}
}

// line is a key's line of a report as "v1/legacy/route:n@last,...".
func line(k KeyReport) string {
	s := fmt.Sprintf("%d/%d/", k.V1Requests, k.LegacyRequests)
	for i, r := range k.LegacyRoutes {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf("%s:%d@%s", r.Route, r.Requests, r.LastCall)
	}
	return s
}

// TestReplicaReport: without Redis the report is this replica's counts,
// every configured key from the start, legacy calls by route with their
// first and last times; a key that leaves the configuration keeps its
// counts and shows no legacy setting.
func TestReplicaReport(t *testing.T) {
	routes := route.NewTable().Routes()
	cfg := testConfig()
	reg := prometheus.NewRegistry()
	c, err := New(reg, cfg, routes, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rep := c.Report(context.Background(), cfg)
	if len(rep.Keys) != 2 || line(rep.Keys[0]) != "0/0/" || line(rep.Keys[1]) != "0/0/" {
		t.Fatalf("before any call: %+v", rep.Keys)
	}
	at := time.Date(2027, 2, 1, 8, 0, 0, 0, time.UTC)
	a := c.Key("a")
	a.Count(routes[1].Index(), true, at.Add(time.Minute))
	a.Count(routes[1].Index(), true, at)
	a.Count(routes[0].Index(), true, at.Add(2*time.Minute))
	a.Count(routes[0].Index(), false, at.Add(time.Hour)) // v1: no legacy time
	c.Key("b").Count(routes[0].Index(), false, at)
	if c.Key("a") != a {
		t.Error("Key made a second counts for the same id")
	}

	cfg2 := testConfig()
	cfg2.Keys = cfg2.Keys[1:] // a leaves
	c.Configure(cfg2)
	rep = c.Report(context.Background(), cfg2)
	if rep.Scope != "replica" || !rep.Enabled || *rep.Sunset != "2027-06-01T00:00:00Z" || *rep.GuideURL != "https://example.com/guide" {
		t.Errorf("report head: %+v", rep)
	}
	want := fmt.Sprintf("1/3/%s:1@2027-02-01T08:02:00Z,%s:2@2027-02-01T08:01:00Z", routes[0].Name, routes[1].Name)
	ka, kb := rep.Keys[0], rep.Keys[1]
	if ka.KeyID != "a" || line(ka) != want || ka.Legacy != "" {
		t.Errorf("a: %s legacy %q, want %s and none", line(ka), ka.Legacy, want)
	}
	if *ka.FirstLegacyUse != "2027-02-01T08:00:00Z" || *ka.LastLegacyUse != "2027-02-01T08:02:00Z" {
		t.Errorf("a: first %s last %s", *ka.FirstLegacyUse, *ka.LastLegacyUse)
	}
	if kb.KeyID != "b" || line(kb) != "1/0/" || kb.Legacy != config.LegacyRetired || kb.FirstLegacyUse != nil {
		t.Errorf("b: %+v", kb)
	}
	if got := series(t, reg); got["a legacy"] != 3 || got["a v1"] != 1 || got["b legacy"] != 0 || got["b v1"] != 1 {
		t.Errorf("series %v", got)
	}
}

// series reads tradergate_migration_requests_total: "key_id api" -> value.
func series(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "tradergate_migration_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got[labels["key_id"]+" "+labels["api"]] = m.GetCounter().GetValue()
		}
	}
	return got
}

// TestCountConcurrently: counts taken at once from many goroutines add up,
// and the first and last times are the least and the greatest.
func TestCountConcurrently(t *testing.T) {
	routes := route.NewTable().Routes()
	c, err := New(prometheus.NewRegistry(), testConfig(), routes, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	at := time.Date(2027, 2, 1, 8, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			k := c.Key("a")
			for i := range 100 {
				k.Count(routes[0].Index(), true, at.Add(time.Duration(g*100+i)*time.Millisecond))
			}
		})
	}
	wg.Wait()
	k := c.Report(context.Background(), testConfig()).Keys[0]
	if k.LegacyRequests != 800 || *k.FirstLegacyUse != "2027-02-01T08:00:00Z" || *k.LastLegacyUse != "2027-02-01T08:00:00.799Z" {
		t.Errorf("%d legacy calls, first %s last %s", k.LegacyRequests, *k.FirstLegacyUse, *k.LastLegacyUse)
	}
}

// TestFleetReport: with Redis, each replica's counts are added to the
// fleet's once each, however many times it flushes, and the report of any
// replica is the fleet's sum; Close adds the last counts.
func TestFleetReport(t *testing.T) {
	srv := redistest.Start(t)
	routes := route.NewTable().Routes()
	cfg := testConfig()
	at := time.Date(2027, 2, 1, 8, 0, 0, 0, time.UTC)
	var cs []*Counts
	for i := range 2 {
		conn, err := fleet.Open(fleet.Config{Addrs: []string{srv.Addr()}, Prefix: "t:"}, func(string) string { return "" }, fleet.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		c, err := New(prometheus.NewRegistry(), cfg, routes, conn, nil)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
		k := c.Key("a")
		k.Count(routes[0].Index(), true, at.Add(time.Duration(i)*time.Minute))
		k.Count(routes[0].Index(), false, at)
	}
	for range 3 {
		for _, c := range cs {
			if err := c.flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	cs[1].Key("b").Count(routes[1].Index(), true, at)
	cs[1].Close() // its last counts go to Redis
	rep := cs[0].Report(context.Background(), cfg)
	cs[0].Close()
	want := fmt.Sprintf("2/2/%s:2@2027-02-01T08:01:00Z", routes[0].Name)
	if rep.Scope != "fleet" || line(rep.Keys[0]) != want || *rep.Keys[0].FirstLegacyUse != "2027-02-01T08:00:00Z" {
		t.Errorf("scope %s, a: %s first %v; want fleet, %s", rep.Scope, line(rep.Keys[0]), rep.Keys[0].FirstLegacyUse, want)
	}
	if want := fmt.Sprintf("0/1/%s:1@2027-02-01T08:00:00Z", routes[1].Name); line(rep.Keys[1]) != want {
		t.Errorf("b: %s, want %s (counted on the replica that closed)", line(rep.Keys[1]), want)
	}
}
