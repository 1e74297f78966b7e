package history

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The streams of a history: subscribers that hold server-sent event
// streams open through the run (docs/CONTRACT.md#streams), reconnecting
// with Last-Event-ID whenever a stream ends, and every event they got.

// StreamEvent is one event a subscriber received.
type StreamEvent struct {
	ID, Type, Data string
	At             time.Time // when its frame was read whole
	Conn           int       // the connection it came on (Subscription.Conns)
	Phase          int       // the run's phase when it came (Recorder.Phase)
}

// StreamConn is one request of a subscriber: a stream opened (or
// refused) and how it ended.
type StreamConn struct {
	Replica     int
	Front       Front
	LastEventID string // sent; "" for none
	Opened      time.Time
	Closed      time.Time
	Status      int    // 0: no answer
	Err         string // why the body ended, when not by an error event or the subscriber
	End         string // the reason of the stream's error event, "" for none
}

// Subscription is what one subscriber of a stream saw over a run.
type Subscription struct {
	Name   string // for the report
	Route  string // the route whose items it streams: orderbook_events, activity, deposits_withdrawals
	Target string // the stream's path and query, as every connection sends it
	// From is the start the target names (from= or fromTimestamp=, Unix
	// ms or s): the first connection, without Last-Event-ID, streams
	// every item from there on.
	From        int64
	Start, Stop time.Time
	Events      []StreamEvent
	Conns       []StreamConn
}

// LastID is the id of the last event received: what a reconnection
// sends as Last-Event-ID.
func (s *Subscription) LastID() string {
	if len(s.Events) == 0 {
		return ""
	}
	return s.Events[len(s.Events)-1].ID
}

// StreamClient is how a subscriber reaches one replica.
type StreamClient struct {
	RT      http.RoundTripper
	Base    string // scheme and host of the replica
	Replica int
	Front   Front
	Key     string // the client's API key, sent as a Bearer token
	// Silence is how long the client waits for a byte (an event or a
	// heartbeat) before it takes the stream for dead.
	Silence time.Duration
	// Phase is the run's phase now (Recorder.Phase).
	Phase func() int
}

// ReadStream opens s's stream once through cl and records its events
// until the stream ends, ctx is done, or nothing at all (not even a
// heartbeat) came for cl.Silence. It returns the connection's record,
// which it has appended to s.Conns.
func ReadStream(ctx context.Context, cl StreamClient, s *Subscription) (c StreamConn) {
	c = StreamConn{Replica: cl.Replica, Front: cl.Front, LastEventID: s.LastID(), Opened: time.Now()}
	rt, base, key, silence := cl.RT, cl.Base, cl.Key, cl.Silence
	conn := len(s.Conns)
	defer func() {
		c.Closed = time.Now()
		s.Conns = append(s.Conns, c)
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+s.Target, nil)
	if err != nil {
		panic("history: " + err.Error()) // a target the harness built
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "text/event-stream")
	if c.LastEventID != "" {
		req.Header.Set("Last-Event-ID", c.LastEventID)
	}
	// A stream that sends nothing for longer than its heartbeat is a
	// dead one; a client gives up on it as an EventSource behind a proxy
	// would.
	watchdog := time.AfterFunc(silence, cancel)
	defer watchdog.Stop()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		c.Err = err.Error()
		return c
	}
	defer resp.Body.Close()
	c.Status = resp.StatusCode
	if c.Status != http.StatusOK {
		return c
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var id, typ, data string
	hasID, hasData := false, false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if ctx.Err() != nil && !watchdog.Stop() {
				c.Err = "silent for " + silence.String()
			} else if c.End == "" && ctx.Err() == nil {
				c.Err = "body: " + err.Error()
			}
			return c
		}
		watchdog.Reset(silence)
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" { // dispatch (HTML Living Standard, "Server-sent events")
			if typ == "error" && !hasID {
				var end struct {
					Reason string `json:"reason"`
				}
				_ = json.Unmarshal([]byte(data), &end)
				c.End = end.Reason
			} else if hasData {
				s.Events = append(s.Events, StreamEvent{ID: id, Type: typ, Data: data, At: time.Now(), Conn: conn, Phase: cl.Phase()})
			}
			id, typ, data, hasID, hasData = "", "", "", false, false
			continue
		}
		if line[0] == ':' {
			continue // a comment: a heartbeat
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			id, hasID = value, true
		case "event":
			typ = value
		case "data":
			if hasData {
				data += "\n"
			}
			data += value
			hasData = true
		}
	}
}

// StreamItem is one item of a stream's truth: the item the legacy host
// holds, rewritten into variant A, with the id and event name the
// contract gives it.
type StreamItem struct {
	ID, Type, Data string
	// Visible is when the legacy host first listed it: its timestamp
	// (order book, ms) or blockTimestamp (activity, transfers, s).
	Visible time.Time
}

// StreamTruth returns every item of a subscription's stream from its
// From on, in the stream's order, as the legacy host holds them now.
type StreamTruth func(s *Subscription) ([]StreamItem, error)

// StreamResult is the verdict on a run's streams.
type StreamResult struct {
	Subscriptions int
	Events        int         // events checked
	ByPhase       map[int]int // events checked, by the phase they came in
	Conns         int         // stream requests
	Ends          map[string]int
	Refused       map[int]int // stream requests answered other than 200, by status (0: no answer)
	// Fresh is how many events were held to the freshness bound (those
	// that came with no fault in force), and MaxLag the longest of
	// their lags.
	Fresh      int
	MaxLag     time.Duration
	Violations []Violation
}

// CheckStreams holds each subscription to the promise of a stream: every
// item of the legacy host from its start to its last event delivered
// once, in the stream's order, each the variant A item exactly; and,
// with no fault in force, each within the freshness bound of its
// route (streamBound) of the item becoming visible.
func (c *Checker) CheckStreams(subs []Subscription) *StreamResult {
	res := &StreamResult{Ends: map[string]int{}, Refused: map[int]int{}, ByPhase: map[int]int{}}
	for i := range subs {
		c.checkStream(&subs[i], res)
	}
	return res
}

func (c *Checker) checkStream(s *Subscription, res *StreamResult) {
	res.Subscriptions++
	res.Conns += len(s.Conns)
	for _, cn := range s.Conns {
		switch {
		case cn.Status != 200:
			res.Refused[cn.Status]++
		case cn.End != "":
			res.Ends[cn.End]++
		case cn.Err != "":
			res.Ends["broken off"]++
		}
	}
	fail := func(rule, format string, args ...any) {
		res.Violations = append(res.Violations, Violation{Rule: rule, Why: s.Name + " (" + s.Target + "): " + fmt.Sprintf(format, args...)})
	}
	truth, err := c.Streams(s)
	if err != nil {
		fail("no stream truth", "%v", err)
		return
	}
	index := make(map[string]int, len(truth))
	for i, it := range truth {
		index[it.ID] = i
	}
	seen := make(map[string]bool, len(s.Events))
	next := 0 // the truth's index of the event due next
	for _, e := range s.Events {
		res.Events++
		res.ByPhase[e.Phase]++
		i, ok := index[e.ID]
		switch {
		case seen[e.ID]:
			fail("stream event twice", "event %s again, on connection %d (Last-Event-ID %q)", e.ID, e.Conn, s.Conns[e.Conn].LastEventID)
			continue
		case !ok:
			seen[e.ID] = true
			fail("stream event not an item of the legacy host", "event %s (%s) is no item of the stream from %d", e.ID, excerpt(e.Data, 0, 80), s.From)
			continue
		case i < next:
			seen[e.ID] = true
			fail("stream event out of order", "event %s came after %s, which follows it", e.ID, truth[next-1].ID)
			continue
		case i > next:
			fail("stream event lost", "%d events between %s and %s never came (the first %s), connection %d with Last-Event-ID %q",
				i-next, idOr(truth, next-1), e.ID, truth[next].ID, e.Conn, s.Conns[e.Conn].LastEventID)
		}
		seen[e.ID] = true
		next = i + 1
		it := &truth[i]
		if e.Data != it.Data || e.Type != it.Type {
			fail("stream event differs", "event %s: %s %s", e.ID, e.Type, diff(e.Data, it.Data))
		}
		// Fresh: an item that became visible while nothing failed comes
		// within the bound of it, or of the subscription's start.
		from := it.Visible
		if from.Before(s.Start) {
			from = s.Start
		}
		if c.anyFault(from, e.At) {
			continue
		}
		res.Fresh++
		lag := e.At.Sub(from)
		res.MaxLag = max(res.MaxLag, lag)
		if bound := c.streamBound(s.Route, e.At); lag > bound {
			fail("stream event late", "event %s came %v after the legacy host listed it, bound %v", e.ID, lag.Round(time.Millisecond), bound)
		}
	}
	// The tail: what became visible a bound before the subscriber left,
	// with no fault since, should have come.
	for _, it := range truth[next:] {
		from := it.Visible
		if from.Before(s.Start) {
			from = s.Start
		}
		if from.Add(c.streamBound(s.Route, s.Stop)).Before(s.Stop) && !c.anyFault(from, s.Stop) {
			fail("stream event lost", "%d events after %s never came (the first %s, listed %s; the subscriber left at %s)",
				len(truth)-next, idOr(truth, next-1), it.ID, it.Visible.Format("15:04:05.000"), s.Stop.Format("15:04:05.000"))
			break
		}
	}
}

func idOr(truth []StreamItem, i int) string {
	if i < 0 {
		return "the start"
	}
	return truth[i].ID
}

// anyFault reports whether a fault on any replica may be seen during
// [from, to], its tail lengthened by StreamTail: a stream's events may
// come from any replica's poll.
func (c *Checker) anyFault(from, to time.Time) bool {
	for _, f := range c.Faults {
		if len(active([]Fault{f}, c.Tails, f.Replica, from.Add(-c.StreamTail), to)) > 0 {
			return true
		}
	}
	return false
}

// streamBound is how long after the legacy host lists an item a
// subscriber may get it, with nothing failing: a poll interval (the
// stream's poll, 1s, never below the route's fresh TTL), the age of the
// page the poll read (the fresh TTL, plus stale-while-revalidate), and
// StreamSlack for the relay between replicas and a loaded machine.
func (c *Checker) streamBound(routeName string, t time.Time) time.Duration {
	b := c.bounds(routeName, t)
	poll := max(time.Second, b.Fresh)
	return poll + b.Fresh + b.SWR + c.StreamSlack
}

// Report is the streams' verdict in a few lines.
func (r *StreamResult) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  streams: %d subscribers, %d events checked (%d held to the freshness bound, the slowest %v), %d stream requests",
		r.Subscriptions, r.Events, r.Fresh, r.MaxLag.Round(time.Millisecond), r.Conns)
	var ends []string
	for k, n := range r.Ends {
		ends = append(ends, fmt.Sprintf("%s: %d", k, n))
	}
	for st, n := range r.Refused {
		ends = append(ends, fmt.Sprintf("refused %s: %d", strconv.Itoa(st), n))
	}
	slices.Sort(ends)
	if len(ends) > 0 {
		fmt.Fprintf(&b, "; ended: %s", strings.Join(ends, ", "))
	}
	b.WriteString("\n")
	return b.String()
}

// Connections describes each connection of a subscription in a few
// words: its replica and front, whether it resumed, how many events it
// got, and how it ended.
func (s *Subscription) Connections() string {
	got := make([]int, len(s.Conns))
	for _, e := range s.Events {
		got[e.Conn]++
	}
	parts := make([]string, len(s.Conns))
	for i, c := range s.Conns {
		how := c.End
		switch {
		case c.Status != 200:
			how = "refused " + strconv.Itoa(c.Status)
		case how == "" && c.Err != "":
			how = c.Err
		case how == "":
			how = "left"
		}
		resumed := ""
		if c.LastEventID != "" {
			resumed = " resumed"
		}
		parts[i] = fmt.Sprintf("replica %d %s%s at %s: %d events, %s", c.Replica, c.Front, resumed, c.Opened.Format("15:04:05.000"), got[i], how)
	}
	return strings.Join(parts, "; ")
}
