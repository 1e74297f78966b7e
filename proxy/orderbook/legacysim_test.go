package orderbook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"tradergate/legacysim"
	"tradergate/normalize"
)

// simEnd is the End of the test sim: a fixed instant keeps its data the
// same on every run.
var simEnd = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// simPages returns a PageFunc that asks a real legacysim over HTTP and
// rewrites its variant B answer to variant A with normalize.Rewrite, as
// the edge's upstream does for the events route.
func simPages(t testing.TB, cfg legacysim.Config) (*legacysim.Sim, func(ctx context.Context, q url.Values) ([]byte, error)) {
	t.Helper()
	cfg.End = simEnd
	cfg.Now = func() time.Time { return simEnd }
	sim := legacysim.New(cfg)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	client := srv.Client()
	get := func(ctx context.Context, q url.Values) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/open-api/v1/orderbook/events?"+q.Encode(), nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("legacysim %s: %d %s", q.Encode(), resp.StatusCode, body)
		}
		out, _, err := normalize.Rewrite(nil, body, normalize.Options{Shape: normalize.OrderBook, TimeField: "timestamp"})
		return out, err
	}
	return sim, get
}

// queryValues is q as the edge forwards it to the events endpoint.
func queryValues(q Query) url.Values {
	v := url.Values{
		"tokenId":   {q.TokenID},
		"eventType": {q.EventType},
		"order":     {q.Order},
		"to":        {strconv.FormatInt(q.To, 10)},
		"limit":     {strconv.Itoa(q.Limit)},
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	return v
}

// allEvents fetches every event of token, both kinds, in ascending order.
func allEvents(t testing.TB, get func(context.Context, url.Values) ([]byte, error), token string) []event {
	t.Helper()
	var evs []event
	q := url.Values{"tokenId": {token}, "limit": {"10000"}}
	for range 1000 {
		body, err := get(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Data struct {
				Items      []event `json:"items"`
				NextCursor *string `json:"nextCursor"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, page.Data.Items...)
		if page.Data.NextCursor == nil {
			return evs
		}
		q.Set("cursor", *page.Data.NextCursor)
	}
	t.Fatal("more than 1000 pages")
	return nil
}

func TestRebuildAgainstLegacysim(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  legacysim.Config
	}{
		{"default", legacysim.Config{Markets: 1, History: 6 * time.Hour}},
		{"variety", legacysim.Config{Markets: 1, History: 2 * time.Hour, OrderBookVariety: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim, get := simPages(t, tc.cfg)
			fetch := func(ctx context.Context, q Query) ([]byte, error) { return get(ctx, queryValues(q)) }
			tokens := sim.Markets()[0].Tokens
			if tc.cfg.OrderBookVariety {
				tokens = tokens[:1] // its stream is ten times as long
			}
			for _, token := range tokens {
				evs := allEvents(t, get, token)
				checkSimTimes(t, fetch, evs, token, tc.cfg.OrderBookVariety)
			}
		})
	}
}

// checkSimTimes rebuilds token's book at the times that matter and checks
// each against the reference.
func checkSimTimes(t *testing.T, fetch PageFunc, evs []event, token string, variety bool) {
	var snaps []int // indexes of the book events
	for i, e := range evs {
		if e.EventType == "book" {
			snaps = append(snaps, i)
		}
	}
	if len(snaps) < 3 {
		t.Fatalf("%d snapshots", len(snaps))
	}
	first, last := evs[0].Timestamp, evs[len(evs)-1].Timestamp
	times := []int64{
		first - 1,        // before the first snapshot
		first,            // on it
		last,             // on the last event
		last + 3_600_000, // after it
	}
	for _, k := range []int{1, len(snaps) - 1} {
		ts := evs[snaps[k]].Timestamp
		times = append(times, ts-1, ts, ts+1)
	}
	for k := range 5 { // between events, spread over the whole stream
		times = append(times, first+(last-first)*int64(2*k+1)/10)
	}
	if variety {
		// The longest run of price changes between two snapshots, ended
		// one change before the next snapshot: more than a page of them.
		gap, at := 0, 0
		for k := 1; k < len(snaps); k++ {
			if n := snaps[k] - snaps[k-1]; n > gap {
				gap, at = n, snaps[k]-1
			}
		}
		if gap <= maxPageSize {
			t.Fatalf("longest run of changes is %d, not over a page", gap)
		}
		times = append(times, evs[at].Timestamp)
		// A snapshot in the millisecond of the change before it.
		for _, i := range snaps[1:] {
			if evs[i].Timestamp == evs[i-1].Timestamp {
				times = append(times, evs[i].Timestamp)
				break
			}
		}
	}
	for _, T := range times {
		checkRebuild(t, fetch, evs, token, T, Options{})
		checkAligned(t, fetch, token, T, Options{}, time.Minute)
	}
}
