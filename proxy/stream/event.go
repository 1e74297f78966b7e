package stream

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"
)

// Event is one item of a stream, encoded once as a server-sent event for
// every subscriber (the HTML Living Standard's "Server-sent events"
// section: fields `id`, `event`, `data`, each on a line, then an empty
// line).
type Event struct {
	// ID is the event's id: an order book event's cursor, or an activity
	// or transfer item's key (docs/CONTRACT.md#streams).
	ID string
	// Type is the SSE event name: an order book event's eventType,
	// `activity` or `transfer`.
	Type string
	// Data is the item as the list endpoint serves it: compact JSON, one
	// line.
	Data []byte
	// At is the item's own time, whence the delivery lag is measured:
	// indexedTimestamp of an order book event, blockTimestamp of an
	// activity or transfer item.
	At time.Time

	// frame is the event as sent; nil for a ring's anchor, the event a
	// stream started after, which is never sent.
	frame []byte
}

// newEvent makes an event and its frame.
func newEvent(id, typ string, data []byte, at time.Time) *Event {
	e := &Event{ID: id, Type: typ, Data: data, At: at}
	f := make([]byte, 0, len(id)+len(typ)+len(data)+24)
	f = append(f, "id: "...)
	f = append(f, id...)
	f = append(f, "\nevent: "...)
	f = append(f, typ...)
	f = append(f, "\ndata: "...)
	f = append(f, data...)
	e.frame = append(f, "\n\n"...)
	return e
}

// anchor is the id-only event a stream starts after.
func anchor(id string) *Event { return &Event{ID: id} }

// page is a list page of the variant A envelope.
type page struct {
	items []json.RawMessage
	next  string // nextCursor; "" for null
}

var errBadPage = errors.New("stream: a list page is not the shape the contract gives")

// parsePage reads a list page: {"message":"OK","status_code":"1",
// "data":{"items":[...],"nextCursor":...}} (docs/CONTRACT.md#envelopes).
// The items are kept as the bytes the page holds.
func parsePage(body []byte) (page, error) {
	var env struct {
		Data *struct {
			Items      []json.RawMessage `json:"items"`
			NextCursor *string           `json:"nextCursor"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return page{}, errBadPage
	}
	if env.Data == nil {
		return page{}, nil // data null: a list with nothing
	}
	p := page{items: env.Data.Items}
	if env.Data.NextCursor != nil {
		p.next = *env.Data.NextCursor
	}
	return p, nil
}

// frameComment is a comment line: what a heartbeat sends.
var frameComment = []byte(": keep-alive\n\n")

// retryFrame is the `retry:` field telling a client how long to wait
// before it reconnects.
func retryFrame(d time.Duration) []byte {
	b := append([]byte("retry: "), strconv.FormatInt(d.Milliseconds(), 10)...)
	return append(b, "\n\n"...)
}

// endFrame is the `error` event a stream the edge ends sends last: the
// reason, a message for people, and the id of the last event sent
// (docs/CONTRACT.md#streams). It carries no `id` field, so that a
// client's Last-Event-ID stays the last event's.
func endFrame(reason Reason, message, lastID string) []byte {
	body, _ := json.Marshal(struct {
		Reason      string `json:"reason"`
		Message     string `json:"message"`
		LastEventID string `json:"lastEventId"`
	}{string(reason), message, lastID})
	b := append([]byte("event: error\ndata: "), body...)
	return append(b, "\n\n"...)
}
