package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"tradergate/legacysim"
	"tradergate/proxy/config"
)

// sseEvent is one server-sent event as a client parses it.
type sseEvent struct {
	id, event, data string
	retry           string
}

// sseReader parses a text/event-stream body the way the HTML standard's
// parser does (the fields the edge sends): comments skipped, an empty
// line ends an event.
type sseReader struct {
	r        *bufio.Reader
	comments int
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReader(r)} }

// next returns the next event (or retry field), or an error at the end.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	seen := false
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if seen {
				return ev, nil
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			s.comments++
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		seen = true
		switch name {
		case "id":
			ev.id = value
		case "event":
			ev.event = value
		case "data":
			ev.data = value
		case "retry":
			ev.retry = value
		}
	}
}

// liveSim is a simulated host in live mode: each token's order book
// changes about every 300ms, each wallet trades about every 2s.
func liveSim() legacysim.Config {
	return legacysim.Config{Seed: 7, History: 2 * time.Hour,
		Live: &legacysim.Live{BookEvery: 300 * time.Millisecond, TradeEvery: 2 * time.Second}}
}

// openStream opens path as a stream with the all-routes key.
func openStream(t *testing.T, e *edge, path string, headers ...string) (*http.Response, *sseReader) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.front.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+keyAll)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.front.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, newSSEReader(resp.Body)
}

// readEvents reads n events (not counting the retry field).
func readEvents(t *testing.T, r *sseReader, n int) []sseEvent {
	t.Helper()
	var out []sseEvent
	for len(out) < n {
		ev, err := r.next()
		if err != nil {
			t.Fatalf("after %d events: %v", len(out), err)
		}
		if ev.id == "" && ev.event == "" {
			continue // the retry field
		}
		out = append(out, ev)
	}
	return out
}

// eventsAfter pages /v1/orderbook/events from cursor, order asc, and
// returns the items' raw JSON.
func eventsAfter(t *testing.T, e *edge, query, cursor string, n int) []json.RawMessage {
	t.Helper()
	resp, body := e.get("/v1/orderbook/events?" + query + "&order=asc&limit=" + itoa(n) + "&cursor=" + url.QueryEscape(cursor))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("events page: %d %s", resp.StatusCode, body)
	}
	var page struct {
		Data struct {
			Items []json.RawMessage `json:"items"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatal(err)
	}
	return page.Data.Items
}

func itoa(n int) string { return strconv.Itoa(n) }

func cursorOf(t *testing.T, item json.RawMessage) string {
	var v struct {
		Cursor string `json:"cursor"`
	}
	if err := json.Unmarshal(item, &v); err != nil {
		t.Fatal(err)
	}
	return v.Cursor
}

func TestOrderBookStreamFollowsAndResumes(t *testing.T) {
	e := newEdge(t, withSim(liveSim()))
	token := e.sim.Markets()[0].Tokens[0]
	resp, r := openStream(t, e, "/v1/orderbook/stream?tokenId="+token)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	first, err := r.next()
	if err != nil || first.retry == "" {
		t.Fatalf("first field %+v, %v; want retry", first, err)
	}
	got := readEvents(t, r, 6)
	// The same events, in the same order, as the events endpoint pages
	// them with order=asc after the first.
	want := eventsAfter(t, e, "tokenId="+token, got[0].id, len(got)-1)
	for i, item := range want {
		ev := got[i+1]
		if ev.data != string(item) || ev.id != cursorOf(t, item) {
			t.Fatalf("event %d: got id %s data %s\nwant %s", i+1, ev.id, ev.data, item)
		}
		var typ struct {
			EventType string `json:"eventType"`
		}
		_ = json.Unmarshal(item, &typ)
		if ev.event != typ.EventType {
			t.Errorf("event %d named %q, eventType %q", i+1, ev.event, typ.EventType)
		}
	}

	// Resuming after the third event: the fourth comes next, nothing is
	// repeated.
	_, r2 := openStream(t, e, "/v1/orderbook/stream?tokenId="+token, "Last-Event-ID", got[2].id)
	again := readEvents(t, r2, 3)
	for i, ev := range again {
		if ev.id != got[3+i].id {
			t.Fatalf("resumed event %d: %s, want %s", i, ev.id, got[3+i].id)
		}
	}
}

func TestStreamRefusals(t *testing.T) {
	e := newEdge(t, withSim(liveSim()), withConfig(func(c *config.Config) { c.Streams.MaxPerKey = 1 }))
	token := e.sim.Markets()[0].Tokens[0]
	resp, body := e.get("/v1/orderbook/stream")
	failure(t, resp, body, http.StatusBadRequest, "tokenId, marketId, or conditionId is required")
	resp, body = e.get("/v1/orderbook/stream?tokenId=" + token + "&eventType=trade")
	failure(t, resp, body, http.StatusBadRequest, "Invalid eventType: values must be book or price_change")
	resp, body = e.get("/v1/orderbook/stream?tokenId="+token, "Last-Event-ID", strings.Repeat("x", 1100))
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a bad Last-Event-ID: %d %s", resp.StatusCode, body)
	}
	resp, body = e.do(http.MethodGet, "/v1/orderbook/stream?tokenId="+token, "Authorization", "Bearer "+keyTxOnly)
	failure(t, resp, body, http.StatusForbidden, "API key is not allowed to use this resource")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.front.URL+"/v1/orderbook/stream?tokenId="+token, nil)
	req.Header.Set("Authorization", "Bearer "+keyAll)
	open, err := e.front.Client().Do(req)
	if err != nil || open.StatusCode != http.StatusOK {
		t.Fatalf("first stream: %v %v", open, err)
	}
	defer open.Body.Close()
	resp, body = e.get("/v1/orderbook/stream?tokenId=" + token)
	failure(t, resp, body, http.StatusTooManyRequests, "Too many open streams for this API key: at most 1")
	if resp.Header.Get("Retry-After") == "" || resp.Header.Get("X-Ratelimit-Limit") == "" {
		t.Errorf("429 fields: %v", resp.Header)
	}
}

// finalEvent reads until the body ends and returns the last event, with
// the retry field last seen before it.
func finalEvent(t *testing.T, r *sseReader) (last sseEvent, retry string) {
	t.Helper()
	for {
		ev, err := r.next()
		if err != nil {
			return last, retry
		}
		if ev.retry != "" {
			retry = ev.retry
		}
		if ev.event != "" {
			last = ev
		}
	}
}

// endReason is the reason an `error` event gives.
func endReason(t *testing.T, ev sseEvent) (reason, lastID string) {
	t.Helper()
	var v struct {
		Reason      string `json:"reason"`
		Message     string `json:"message"`
		LastEventID string `json:"lastEventId"`
	}
	if ev.event != "error" || json.Unmarshal([]byte(ev.data), &v) != nil || v.Message == "" {
		t.Fatalf("not an error event: %+v", ev)
	}
	return v.Reason, v.LastEventID
}

// A reload keeps every stream whose key it keeps, and ends those of a key
// it removes, with an `error` event saying why.
func TestStreamReload(t *testing.T) {
	e := newEdge(t, withSim(liveSim()))
	token := e.sim.Markets()[0].Tokens[0]
	_, r := openStream(t, e, "/v1/orderbook/stream?tokenId="+token)
	before := readEvents(t, r, 1)
	if err := e.srv.Reload(e.cfg); err != nil {
		t.Fatal(err)
	}
	after := readEvents(t, r, 2)
	if after[0].id == before[0].id {
		t.Fatalf("an event repeated across the reload")
	}
	next := *e.cfg
	next.Keys = next.Keys[1:] // "all" removed
	if err := e.srv.Reload(&next); err != nil {
		t.Fatal(err)
	}
	last, _ := finalEvent(t, r)
	if reason, _ := endReason(t, last); reason != "key_revoked" {
		t.Fatalf("ended with %q", reason)
	}
}

// Shutting down ends each stream within the drain, with a retry hint and
// an `error` event saying why, naming the last event sent.
func TestStreamShutdown(t *testing.T) {
	e := newEdge(t, withSim(liveSim()))
	token := e.sim.Markets()[0].Tokens[0]
	_, r := openStream(t, e, "/v1/orderbook/stream?tokenId="+token)
	got := readEvents(t, r, 1)
	start := time.Now()
	e.stop()
	last, retry := finalEvent(t, r)
	reason, lastID := endReason(t, last)
	if reason != "shutting_down" || retry == "" || lastID == "" {
		t.Fatalf("ended with %q, retry %q, last id %q (first event %s)", reason, retry, lastID, got[0].id)
	}
	if err := e.wait(); err != nil || time.Since(start) > e.cfg.Server.ShutdownTimeout {
		t.Fatalf("Serve: %v after %v", err, time.Since(start))
	}
}

// A quiet stream gets a comment every streams.heartbeat.
func TestStreamHeartbeat(t *testing.T) {
	e := newEdge(t, withSim(liveSim()), withConfig(func(c *config.Config) { c.Streams.Heartbeat = time.Second }))
	token := e.sim.Markets()[0].Tokens[0]
	// Snapshots come every ten minutes: quiet for the test's seconds.
	_, r := openStream(t, e, "/v1/orderbook/stream?eventType=book&tokenId="+token)
	done := make(chan int, 1)
	go func() {
		comments := 0
		for comments < 2 {
			line, err := r.r.ReadString('\n')
			if err != nil {
				break
			}
			if strings.HasPrefix(line, ":") {
				comments++
			}
		}
		done <- comments
	}()
	select {
	case n := <-done:
		if n < 2 {
			t.Fatalf("%d comments", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no heartbeats")
	}
}
