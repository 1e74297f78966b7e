package history

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"tradergate/legacysim"
	"tradergate/normalize"
	"tradergate/proxy/route"
)

// The run's subscribers: a few clients that hold event streams open from
// the first phase to the last, on order book streams with filters and on
// the activity and transfers of wallets the live legacy host keeps
// trading.

// streamSpec is one subscriber: its stream and the replica it opens it
// on first.
type streamSpec struct {
	name    string
	route   string // the route whose items it streams
	path    string // the stream's path
	filters string // its filters, each "name=value", joined by &
	replica int
}

// streamSpecs are the run's subscribers, spread over the replicas: four
// on order book streams (a market, a token, a token's price changes, a
// condition), three on wallets' activity, one on a wallet's transfers.
func (f *fleet) streamSpecs() []streamSpec {
	var open []int
	for i, m := range f.sim.Markets() {
		if !m.Resolved {
			open = append(open, i)
		}
	}
	if len(open) < 3 {
		f.t.Fatalf("the legacy host has %d open markets, the subscribers want 3", len(open))
	}
	ms := f.sim.Markets()
	m0, m1, m2 := ms[open[0]], ms[open[1]], ms[open[2]]
	w := f.sim.Wallets()
	book, act, tr := route.OrderBookEvents, route.Activity, routeTransfers
	return []streamSpec{
		{"book of market " + m0.ID, book, "/v1/orderbook/stream", "marketId=" + m0.ID, 0},
		{"book of a token", book, "/v1/orderbook/stream", "tokenId=" + m1.Tokens[0], 1},
		{"price changes of a token", book, "/v1/orderbook/stream", "tokenId=" + m1.Tokens[1] + "&eventType=price_change", 2},
		{"book of a condition", book, "/v1/orderbook/stream", "conditionId=" + m2.ConditionID, 0},
		{"activity of wallet 0", act, "/v1/trader/" + w[0] + "/activity/stream", "", 1},
		{"activity of wallet 1", act, "/v1/trader/" + w[1] + "/activity/stream", "", 2},
		{"activity of wallet 2", act, "/v1/trader/" + w[2] + "/activity/stream", "", 0},
		{"transfers of wallet 0", tr, "/v1/trader/" + w[0] + "/deposits-withdrawals/stream", "", 2},
	}
}

// streamSilence is how long a subscriber waits for a byte before it takes
// its stream for dead: a few of the fleet's heartbeats (streams.heartbeat
// 1s), more under the race detector.
func streamSilence() time.Duration {
	if raceEnabled {
		return 15 * time.Second
	}
	return 5 * time.Second
}

// subscribe holds one stream open until stop is closed: from a little
// before the run began (so that its first request catches up), then,
// whenever the stream ends or breaks, again with Last-Event-ID on the
// next replica, as a load balancer would send it anywhere.
func (f *fleet) subscribe(spec streamSpec, start time.Time, stop <-chan struct{}) *Subscription {
	s := &Subscription{Name: spec.name, Route: spec.route, Start: start}
	q := spec.filters
	if q != "" {
		q += "&"
	}
	if spec.route == route.OrderBookEvents {
		s.From = start.Add(-5 * time.Second).UnixMilli()
		q += "from=" + strconv.FormatInt(s.From, 10)
	} else {
		s.From = start.Add(-30 * time.Second).Unix()
		q += "fromTimestamp=" + strconv.FormatInt(s.From, 10)
	}
	s.Target = spec.path + "?" + q
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	rep := spec.replica
	for ctx.Err() == nil {
		front := H1
		if rep > 0 {
			front = H2
			if len(s.Conns)%2 == 1 {
				front = H1TLS
			}
		}
		c := ReadStream(ctx, StreamClient{RT: f.transport[rep][front], Base: f.reps[rep].base(), Replica: rep, Front: front,
			Key: clientKey, Silence: streamSilence(), Phase: f.rec.Phase}, s)
		if c.Status != http.StatusOK {
			// Refused (a fault of the legacy host on the first read, a
			// replica down): wait a little, as retry: advises.
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
		rep = (rep + 1) % replicas
	}
	s.Stop = time.Now()
	return s
}

// startSubscribers starts the subscribers; wait returns what they saw
// once stop is closed.
func (f *fleet) startSubscribers(stop <-chan struct{}) (wait func() []Subscription) {
	specs := f.streamSpecs()
	subs := make([]*Subscription, len(specs))
	var wg sync.WaitGroup
	start := time.Now()
	for i, spec := range specs {
		wg.Go(func() { subs[i] = f.subscribe(spec, start, stop) })
	}
	return func() []Subscription {
		wg.Wait()
		out := make([]Subscription, len(subs))
		for i, s := range subs {
			out[i] = *s
		}
		return out
	}
}

// streamTruth is a subscription's truth: the twin's pages of the route
// the stream reads, from the subscription's start to now, rewritten by
// the edge's rewrite, each item with the id and name the contract gives
// it (docs/CONTRACT.md#streams). The twin holds the same data as the
// legacy host; its items are only ever appended, so asking after the run
// gives every item the run could have streamed.
func (f *fleet) streamTruth(s *Subscription) ([]StreamItem, error) {
	path, rawQuery, _ := strings.Cut(s.Target, "?")
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, err
	}
	legacy := "/open-api" + strings.TrimSuffix(path, "/stream")
	if path == "/v1/orderbook/stream" {
		legacy = "/open-api/v1/orderbook/events"
	}
	rt, _ := route.NewTable().MatchLegacy(legacy)
	if rt == nil {
		return nil, fmt.Errorf("no route for %s", legacy)
	}
	page := func(v url.Values) ([]json.RawMessage, string, error) {
		req := httptest.NewRequest(http.MethodGet, legacy+"?"+v.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+legacyKey)
		w := httptest.NewRecorder()
		f.twin.ServeHTTP(w, req)
		if w.Code != 200 {
			return nil, "", fmt.Errorf("the legacy host answered %s?%s with %d: %s", legacy, v.Encode(), w.Code, w.Body.String())
		}
		out, _, err := normalize.Rewrite(nil, w.Body.Bytes(), normalize.Options{Shape: rt.Shape, ShiftCents: true, TimeField: rt.TimeField})
		if err != nil {
			return nil, "", err
		}
		var env struct {
			Data struct {
				Items      []json.RawMessage `json:"items"`
				NextCursor *string           `json:"nextCursor"`
			} `json:"data"`
		}
		if err := json.Unmarshal(out, &env); err != nil {
			return nil, "", err
		}
		next := ""
		if env.Data.NextCursor != nil {
			next = *env.Data.NextCursor
		}
		return env.Data.Items, next, nil
	}
	v := url.Values{}
	for k, vs := range q {
		v[k] = vs
	}
	var items []StreamItem
	if rt.Name == route.OrderBookEvents {
		// The events endpoint with order=asc is the stream's order.
		v.Set("order", "asc")
		v.Set("limit", "1000")
		for {
			got, next, err := page(v)
			if err != nil {
				return nil, err
			}
			for _, raw := range got {
				var it struct {
					Cursor    string `json:"cursor"`
					EventType string `json:"eventType"`
					Timestamp int64  `json:"timestamp"`
				}
				if err := json.Unmarshal(raw, &it); err != nil {
					return nil, err
				}
				items = append(items, StreamItem{ID: it.Cursor, Type: it.EventType, Data: string(raw), Visible: time.UnixMilli(it.Timestamp)})
			}
			if next == "" {
				return items, nil
			}
			v.Set("cursor", next)
		}
	}
	// A trader's list, newest first: every page of it from the start,
	// then the contract's ids, `<blockTimestamp>-<txHash>-<n>`, n
	// numbering the items of one second and transaction in the order of
	// their bytes, in the order of the ids' parts.
	typ := "activity"
	if rt.Name == routeTransfers {
		typ = "transfer"
	}
	v.Set("limit", "100")
	type keyed struct {
		ts  int64
		tx  string
		raw string
	}
	var all []keyed
	for {
		got, next, err := page(v)
		if err != nil {
			return nil, err
		}
		for _, raw := range got {
			var it struct {
				BlockTimestamp int64  `json:"blockTimestamp"`
				TxHash         string `json:"txHash"`
			}
			if err := json.Unmarshal(raw, &it); err != nil {
				return nil, err
			}
			all = append(all, keyed{it.BlockTimestamp, strings.ToLower(it.TxHash), string(raw)})
		}
		if next == "" || len(got) == 0 {
			break
		}
		v.Set("cursor", next)
	}
	slices.SortFunc(all, func(a, b keyed) int {
		if a.ts != b.ts {
			return int(a.ts - b.ts)
		}
		if a.tx != b.tx {
			return strings.Compare(a.tx, b.tx)
		}
		return strings.Compare(a.raw, b.raw)
	})
	n := 0
	for i, k := range all {
		if i > 0 && k.ts == all[i-1].ts && k.tx == all[i-1].tx {
			n++
		} else {
			n = 0
		}
		id := strconv.FormatInt(k.ts, 10) + "-" + k.tx + "-" + strconv.Itoa(n)
		items = append(items, StreamItem{ID: id, Type: typ, Data: k.raw, Visible: time.Unix(k.ts, 0)})
	}
	return items, nil
}

// streamSlack is what a stream's freshness bound allows beyond the
// route's poll and TTLs: the relay between replicas, a busy machine's
// scheduling, six times slower under the race detector.
func streamSlack() time.Duration {
	if raceEnabled {
		return 6 * time.Second
	}
	return 3 * time.Second
}

// routeTransfers is the route name of a trader's deposits and withdrawals
// (proxy/route keeps it unexported).
const routeTransfers = "deposits_withdrawals"

// A stream opened a few seconds behind a busy order book, on a legacy
// host that takes longer to answer a page than the book takes to get its
// next event, is caught up and handed to its hub; it does not end
// too_far_behind.
//
// Its first read (cursor or from=, a new cache key, so a legacy call)
// reaches the events of the moment the legacy host answered: past the
// hub's newest, which the hub only gets at its next poll. Were the
// catch-up to read on from there, each page would hold the events that
// arrived meanwhile, count against streams.catch_up_pages, and the stream
// would end after 11 reads though it was never more than one page behind
// (docs/CONTRACT.md#streams). Subscriber.catchUp waits for the hub's next
// poll once a read reaches the end of the pages (TestCatchUpMeetsTheHub
// in proxy/stream holds that deterministically; this is the whole fleet).
func TestStreamCatchUpOvertakesHub(t *testing.T) {
	f := newFleet(t)
	m := f.sim.Markets()[0]
	// Every legacy page of the order book takes 300ms, more than twice
	// the gap between two events of a market (125ms on average).
	f.sim.SetFaults(legacysim.Faults{Route: "orderbook_events", Latency: 300 * time.Millisecond})
	defer f.sim.SetFaults(legacysim.Faults{})
	start := time.Now()
	s := &Subscription{Name: "book of a market", Route: route.OrderBookEvents, Start: start,
		Target: "/v1/orderbook/stream?marketId=" + m.ID + "&from=" + strconv.FormatInt(start.Add(-3*time.Second).UnixMilli(), 10)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := ReadStream(ctx, StreamClient{RT: f.transport[0][H1], Base: f.reps[0].base(), Front: H1, Key: clientKey,
		Silence: streamSilence(), Phase: func() int { return 0 }}, s)
	if c.End == "too_far_behind" {
		t.Fatalf("a stream 3s behind (one page) ended too_far_behind after %v and %d events", c.Closed.Sub(c.Opened).Round(time.Millisecond), len(s.Events))
	}
	t.Logf("%s", s.Connections())
}
