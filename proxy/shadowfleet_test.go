package proxy_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tradergate/internal/testkit"
	"tradergate/internal/testkit/redistest"
	"tradergate/proxy"
	"tradergate/proxy/native"
	"tradergate/proxy/route"
)

// GET /shadow with Redis (docs/OPERATING.md "Moving the backend"): every
// replica posts its report in Redis, and the one asked merges the fleet's.

// replicaID is the id e posts under, as its status page shows it.
func replicaID(t *testing.T, e *edge) string {
	t.Helper()
	testkit.Eventually(t, "the admin listener", func() bool { return e.srv.AdminAddr() != "" })
	_, body := getText(t, "http://"+e.srv.AdminAddr()+"/status.json")
	var snap struct {
		Replica string `json:"replica"`
	}
	if err := json.Unmarshal([]byte(body), &snap); err != nil || snap.Replica == "" {
		t.Fatalf("status.json: %v\n%.300s", err, body)
	}
	return snap.Replica
}

// nativeFleet is two replicas over one Redis with the native section
// routes and edit, each on a map of its own (the configuration's defaults
// are filled in place).
func nativeFleet(t *testing.T, redisAddr string, n *nativeHost, routes map[string]native.RouteConfig, edit func(*native.Config), opts ...edgeOption) (a, b *edge) {
	t.Helper()
	opts = append(opts, withSim(nativeSim()), withClock(testkit.NewClock(nativeBase).Now), withRedis(redisAddr))
	a = newEdge(t, append(opts, withNative(n, maps.Clone(routes), edit))...)
	b = newEdge(t, append(opts, withNative(n, maps.Clone(routes), edit), withUpstreamOf(a))...)
	return a, b
}

// settledActivity is a settled activity page of the sim's i-th wallet.
func settledActivity(e *edge, i int) string {
	return "/v1/trader/" + e.sim.Wallets()[i] + "/activity?toTimestamp=" + strconv.FormatInt(nativeBase.Add(-time.Hour).Unix(), 10)
}

// Differences found on two replicas both show on either's /shadow,
// summed, with scope "fleet": the replica never asked posts its figures
// by itself. When Redis goes, /shadow answers the replica's own figures
// and logs why.
func TestShadowFleetSumsTheReplicas(t *testing.T) {
	r := redistest.Start(t)
	n := sizeChanged(t)
	logs := &testkit.LogBuffer{}
	a, b := nativeFleet(t, r.Addr(), n, map[string]native.RouteConfig{route.Activity: {Mode: native.ModeShadow}}, nil,
		func(s *edgeSetup) { s.logger = logs.Logger() })
	// Two pages: a page one replica fetched would be a shared-tier hit on
	// the other, which compares nothing.
	for i, e := range []*edge{a, b} {
		if resp, body := e.get(settledActivity(e, i)); resp.StatusCode != 200 || resp.Header.Get("X-Cache") != "MISS" {
			t.Fatalf("replica %d: %d %s %.200s", i, resp.StatusCode, resp.Header.Get("X-Cache"), body)
		}
	}

	// Only a is asked: b's figures come from its own periodic post.
	var act native.RouteReport
	var rep native.Report
	testkit.Eventually(t, "both replicas' differences on a's /shadow", func() bool {
		rep = shadowReport(t, a)
		act = routeReport(t, rep, route.Activity)
		return act.Different == 2
	})
	if rep.Scope != "fleet" || rep.Replicas != 2 || !rep.Enabled {
		t.Errorf("scope %q, replicas %d, enabled %v; want the fleet's two", rep.Scope, rep.Replicas, rep.Enabled)
	}
	if act.Compared != 2 || act.Equal != 0 || act.Requests["ok"] != 2 || act.Mode != native.ModeShadow ||
		!slices.Equal(act.TopPaths, []native.PathCount{{Path: "data.items[].size", Count: 2}}) || len(act.Recent) != 2 {
		t.Errorf("activity on the fleet: %+v", act)
	}
	if bAct := routeReport(t, shadowReport(t, b), route.Activity); bAct.Different != 2 || bAct.Compared != 2 {
		t.Errorf("activity on b's /shadow: %+v, want the same sums", bAct)
	}

	r.Stop()
	rep = shadowReport(t, a)
	if act := routeReport(t, rep, route.Activity); rep.Scope != "replica" || rep.Replicas != 1 || act.Different != 1 {
		t.Errorf("without Redis: scope %q, replicas %d, different %d; want a's own figures", rep.Scope, rep.Replicas, act.Different)
	}
	if !strings.Contains(logs.String(), "shadow report: the fleet's figures could not be had") {
		t.Error("no warning that the report is the replica's only")
	}
}

// A route one replica rolled back shows as rolled back on the fleet's
// /shadow, with that replica's id; the others still run the mode. A
// replica that stops drops off once its post expires.
func TestShadowFleetRollbackAndDropOff(t *testing.T) {
	r := redistest.Start(t)
	n := newNativeHost(t)
	n.setFault(func(w http.ResponseWriter, r *http.Request, rt *route.Route, page []byte) bool {
		http.Error(w, "down", http.StatusBadGateway)
		return true
	})
	a, b := nativeFleet(t, r.Addr(), n, map[string]native.RouteConfig{"tx": {Mode: native.ModeNative}}, func(c *native.Config) {
		c.Rollback = native.RollbackConfig{ErrorRatio: 0.5, Window: time.Minute, MinRequests: 5}
	})
	idA, idB := replicaID(t, a), replicaID(t, b)
	if idA == idB {
		t.Fatalf("both replicas are %q", idA)
	}
	for _, tx := range b.sim.TradeTxs()[:5] {
		if resp, body := b.get("/v1/tx/" + tx); resp.StatusCode != 200 {
			t.Fatalf("a client saw %d %s", resp.StatusCode, body)
		}
	}
	// Asked, b posts its report at once. Its rolled back route goes on
	// comparing in the background: ask until a's sums are b's own.
	var own, tx native.RouteReport
	var rep native.Report
	testkit.Eventually(t, "b's figures on a's /shadow", func() bool {
		own = routeReport(t, shadowReport(t, b), "tx")
		rep = shadowReport(t, a)
		tx = routeReport(t, rep, "tx")
		return own.Rollback.RolledBack && reflect.DeepEqual(tx.Requests, own.Requests)
	})
	if rep.Scope != "fleet" || rep.Replicas != 2 {
		t.Errorf("scope %q, replicas %d", rep.Scope, rep.Replicas)
	}
	if !tx.Rollback.RolledBack || !slices.Equal(tx.Rollback.RolledBackOn, []string{idB}) ||
		!strings.Contains(tx.Rollback.Reason, "passed rollback.error_ratio 0.5") || tx.Rollback.At == nil {
		t.Errorf("tx on a's /shadow: %+v, want rolled back on %s", tx.Rollback, idB)
	}
	own.Rollback.RolledBackOn = []string{idB}
	if tx.EffectiveMode != native.ModeNative || tx.Requests["5xx"] < 5 || !reflect.DeepEqual(tx.Rollback, own.Rollback) {
		t.Errorf("tx on a's /shadow: effective %s, calls %v, rollback %+v; want a still native and b's failures %+v",
			tx.EffectiveMode, tx.Requests, tx.Rollback, own.Rollback)
	}

	// b's next post lasts a moment; then b stops.
	proxy.SetShadowPostTTL(b.srv, 200*time.Millisecond)
	shadowReport(t, b)
	b.stop()
	if err := b.wait(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "b to drop off a's /shadow", func() bool {
		rep = shadowReport(t, a)
		return rep.Replicas == 1
	})
	if tx := routeReport(t, rep, "tx"); rep.Scope != "fleet" || tx.Rollback.RolledBack || tx.Requests["5xx"] != 0 {
		t.Errorf("after b stopped: scope %q, tx %+v", rep.Scope, tx)
	}
	rc := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer rc.Close()
	ids, err := rc.SMembers(context.Background(), "tradergate:shadow-replicas").Result()
	if err != nil || !slices.Equal(ids, []string{idA}) {
		t.Errorf("the index holds %v (%v), want only %s", ids, err, idA)
	}
}
