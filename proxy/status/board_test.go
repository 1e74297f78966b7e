package status

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tradergate/internal/testkit"
	"tradergate/internal/testkit/redistest"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func singleClient(t *testing.T) redis.UniversalClient {
	t.Helper()
	srv := redistest.Start(t)
	c := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{srv.Addr()}})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestBoardSumsTwoReplicas(t *testing.T) {
	ctx := testCtx(t)
	client := singleClient(t)
	// Two replicas, each with its own Board, as in two processes.
	a, b := NewBoard(client, BoardOptions{Prefix: "tg"}), NewBoard(client, BoardOptions{Prefix: "tg"})
	ra := replica{ID: "edge-a", Ready: true, LastSeen: taken, Version: "v1", Figures: figures{
		RequestsPerSec: 300, ErrorsPerSec: 3, CacheLookupsPerSec: 200, CacheHitsPerSec: 190,
		UpstreamCallsPerSec: 10, RefusedPerSec: 1, UpstreamInFlight: 4, CacheEntries: 1000, CacheBytes: 1 << 20, OpenBreakers: 1,
	}}
	rb := replica{ID: "edge-b", Ready: false, LastSeen: taken.Add(-time.Second), Version: "v1", Figures: figures{
		RequestsPerSec: 100, ErrorsPerSec: 0, CacheLookupsPerSec: 100, CacheHitsPerSec: 10,
		UpstreamCallsPerSec: 90, UpstreamInFlight: 6, CacheEntries: 500, CacheBytes: 2 << 20,
	}}
	if err := a.publish(ctx, ra); err != nil {
		t.Fatal(err)
	}
	if err := b.publish(ctx, rb); err != nil {
		t.Fatal(err)
	}
	// Another deployment's replica on the same Redis is not ours.
	if err := NewBoard(client, BoardOptions{Prefix: "other"}).publish(ctx, replica{ID: "stranger"}); err != nil {
		t.Fatal(err)
	}
	got, err := a.collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "edge-a" || got[1].ID != "edge-b" || !got[0].LastSeen.Equal(taken) || got[1].Ready {
		t.Fatalf("collected %+v", got)
	}
	v := newFleetView(got)
	want := figures{RequestsPerSec: 400, ErrorsPerSec: 3, CacheLookupsPerSec: 300, CacheHitsPerSec: 200,
		UpstreamCallsPerSec: 100, RefusedPerSec: 1, UpstreamInFlight: 10, CacheEntries: 1500, CacheBytes: 3 << 20, OpenBreakers: 1}
	if v.Sum != want {
		t.Errorf("sum %+v, want %+v", v.Sum, want)
	}
	// Ratios of the sums: 200 hits of 300 lookups, not the mean of 95 %
	// and 10 %.
	if !near(v.HitRatio, 200.0/300) || !near(v.ErrorRatio, 3.0/400) || !near(v.LegacyCallsPerRequest, 100.0/400) {
		t.Errorf("ratios: hit %v, error %v, legacy calls per request %v", v.HitRatio, v.ErrorRatio, v.LegacyCallsPerRequest)
	}

	// The page lists them.
	h := Handler(fixture, Options{Board: a})
	_, page := get(t, h, "/")
	if !strings.Contains(page, `data-replica="edge-a"`) || !strings.Contains(page, `data-replica="edge-b"`) || strings.Contains(page, "stranger") {
		t.Error("the page does not list the board's replicas")
	}
}

func TestBoardReplicaExpires(t *testing.T) {
	ctx := testCtx(t)
	client := singleClient(t)
	long := NewBoard(client, BoardOptions{})
	short := NewBoard(client, BoardOptions{TTL: 200 * time.Millisecond})
	if err := long.publish(ctx, replica{ID: "stays"}); err != nil {
		t.Fatal(err)
	}
	if err := short.publish(ctx, replica{ID: "goes"}); err != nil {
		t.Fatal(err)
	}
	if got, err := long.collect(ctx); err != nil || len(got) != 2 {
		t.Fatalf("collected %+v, %v", got, err)
	}
	// Redis expires the key on its own clock; wait for it.
	testkit.Eventually(t, "the short-lived replica to expire", func() bool {
		got, err := long.collect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(got) == 1 && got[0].ID == "stays"
	})
	// The read that found its post gone took its id out of the index,
	// <prefix>:status-replicas.
	if ids, err := client.SMembers(ctx, "tradergate:status-replicas").Result(); err != nil || len(ids) != 1 || ids[0] != "stays" {
		t.Errorf("index %v, %v; want [stays]", ids, err)
	}
}

// Reading the board costs a request per replica, not a walk over the
// keyspace that the cache and the limiter fill: no SCAN, whatever else
// Redis holds.
func TestBoardCollectDoesNotScan(t *testing.T) {
	ctx := testCtx(t)
	client := singleClient(t)
	b := NewBoard(client, BoardOptions{Prefix: "tg"})
	if _, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range 5000 {
			p.Set(ctx, fmt.Sprintf("tg:l2:page-%d", i), "x", time.Minute)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"edge-a", "edge-b"} {
		if err := b.publish(ctx, replica{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := client.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := b.collect(ctx)
	if err != nil || len(got) != 2 || got[0].ID != "edge-a" || got[1].ID != "edge-b" {
		t.Fatalf("collected %+v, %v", got, err)
	}
	stats, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stats, "cmdstat_scan:") || strings.Contains(stats, "cmdstat_keys:") {
		t.Errorf("Collect walked the keyspace:\n%s", stats)
	}
	if !strings.Contains(stats, "cmdstat_get:calls=2,") {
		t.Errorf("Collect did not read exactly the two posts:\n%s", stats)
	}
}

func TestBoardRun(t *testing.T) {
	ctx := testCtx(t)
	client := singleClient(t)
	b := NewBoard(client, BoardOptions{TTL: time.Second})
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Run(rctx, 100*time.Millisecond, func() Snapshot { return Snapshot{Replica: "edge-run", Ready: true, Cache: cacheView{Entries: 7}} })
	}()
	defer func() { stop(); <-done }()
	testkit.Eventually(t, "Run to publish", func() bool {
		got, err := b.collect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 && (got[0].ID != "edge-run" || got[0].Figures.CacheEntries != 7) {
			t.Fatalf("published %+v", got[0])
		}
		return len(got) == 1
	})
}

func TestBoardRedisDown(t *testing.T) {
	ctx := testCtx(t)
	srv := redistest.Start(t)
	client := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{srv.Addr()}, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = client.Close() })
	srv.Stop()
	b := NewBoard(client, BoardOptions{})
	if err := b.publish(ctx, replica{ID: "x"}); err == nil {
		t.Error("publish to a stopped Redis succeeded")
	}
	h := Handler(fixture, Options{Board: b, FleetTimeout: 500 * time.Millisecond})
	_, body := get(t, h, "/status.json")
	if !strings.Contains(body, `"error": "status: read the fleet:`) || !strings.Contains(body, "fleet figures unavailable") {
		t.Errorf("the fleet's error is not shown:\n%s", body)
	}
}

// In a Cluster the posts hash to every master; Collect must scan them all.
func TestBoardCluster(t *testing.T) {
	ctx := testCtx(t)
	cl := redistest.StartCluster(t, 3)
	client := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: cl.Addrs(), IsClusterMode: true})
	t.Cleanup(func() { _ = client.Close() })
	b := NewBoard(client, BoardOptions{Prefix: "tg"})
	const n = 12
	for i := range n {
		if err := b.publish(ctx, replica{ID: fmt.Sprintf("edge-%02d", i), Figures: figures{RequestsPerSec: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	// The ids must have landed on more than one master, or the test
	// proves nothing.
	masters := 0
	for _, node := range cl.Nodes() {
		c := redis.NewClient(&redis.Options{Addr: node.Addr()})
		keys, _, err := c.Scan(ctx, 0, "tg:status:*", 100).Result()
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) > 0 {
			masters++
		}
	}
	if masters < 2 {
		t.Fatalf("the posts landed on %d master(s)", masters)
	}
	got, err := b.collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n || newFleetView(got).Sum.RequestsPerSec != n {
		t.Errorf("collected %d replicas, want %d: %+v", len(got), n, got)
	}
}

// A page gives one answer for its own replica: its header, its reasons and
// its fleet row read the snapshot the page is drawn from, not the post the
// replica made before (here, while it was starting, or still serving).
func TestPageOwnReplicaIsOneFact(t *testing.T) {
	ctx := testCtx(t)
	b := NewBoard(singleClient(t), BoardOptions{})
	for _, ready := range []bool{true, false} {
		if err := b.publish(ctx, replica{ID: "edge-1", Ready: !ready, LastSeen: taken.Add(-4 * time.Second)}); err != nil {
			t.Fatal(err)
		}
		if err := b.publish(ctx, replica{ID: "edge-2", Ready: true, LastSeen: taken}); err != nil {
			t.Fatal(err)
		}
		src := func() Snapshot { s := fixture(); s.Ready = ready; return s } // the activity breaker is open
		h := Handler(src, Options{Board: b})
		var s Snapshot
		_, body := get(t, h, "/status.json")
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range s.Fleet.Replicas {
			ids = append(ids, r.ID)
			if r.ID == "edge-1" && r.Ready != ready {
				t.Errorf("ready %v: the fleet row of edge-1 says ready %v", ready, r.Ready)
			}
		}
		if !slices.Equal(ids, []string{"edge-1", "edge-2"}) {
			t.Errorf("fleet %v, want edge-1 once and edge-2", ids)
		}
		notReady := 0
		for _, reason := range s.Health.Reasons {
			if strings.Contains(reason, "not ready") {
				notReady++
			}
		}
		if want := map[bool]int{true: 0, false: 1}[ready]; notReady != want {
			t.Errorf("ready %v: reasons %q, want %d saying not ready", ready, s.Health.Reasons, want)
		}
		_, page := get(t, h, "/")
		yes := map[bool]string{true: ">yes<", false: ">no<"}[ready]
		header := page[strings.Index(page, `id="ready"`):]
		row := page[strings.Index(page, `data-replica="edge-1"`):]
		if !strings.HasPrefix(header[strings.Index(header, ">"):], yes) || !strings.Contains(row[:strings.Index(row, "</tr>")], yes) {
			t.Errorf("ready %v: the header or the fleet row does not say %s", ready, yes)
		}
	}
}
