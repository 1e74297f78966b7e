package stream

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The fleet's streams: one poller per canonical stream for every replica.
//
// Each replica with subscribers of a stream runs its hub. One of them
// holds the stream's lease, a Redis key set with NX and a TTL
// (streams.lease) that it renews every third of it: that replica polls,
// and publishes each poll's result, events or none, on the stream's
// pub/sub channel before it sends the events to its own subscribers. The
// others follow the channel. When the holder stops renewing (it died, or
// lost Redis), another replica takes the key within the lease and polls
// from where its own events stand, so nothing the dead holder published
// is lost, and nothing it polled without publishing either.
//
// Pub/sub rather than Redis Streams: it holds no memory in Redis per
// stream, needs no blocking read per stream, and works the same on a
// Redis Cluster (the cache's notices use it already). Its price is that a
// message can be lost (a reconnection, a slow subscriber connection). A
// message names the head it follows from, so a replica that missed one
// knows at the next (the holder publishes every poll, empty or not): it
// reads the missing events from the pages through the page cache, the
// shared tier usually holding them, and only then applies the message.
// A subscriber sees those events a poll late, never lost and never twice.
//
// Without Redis, or while Redis is unreachable (the fleet breaker open),
// every replica polls for itself.

// message is what the lease holder publishes after each poll.
type message struct {
	From   string      `json:"f"` // the id the poll read after ("" before any event)
	Next   string      `json:"n"` // the id after the events ("" when none)
	Events []wireEvent `json:"e"`
}

type wireEvent struct {
	ID   string          `json:"i"`
	Type string          `json:"t"`
	At   int64           `json:"a"` // Unix ms
	Data json.RawMessage `json:"d"`
}

func (msg *message) events() []*Event {
	evs := make([]*Event, len(msg.Events))
	for i, w := range msg.Events {
		evs[i] = newEvent(w.ID, w.Type, w.Data, time.UnixMilli(w.At))
	}
	return evs
}

type relay struct {
	m       *Manager
	rdb     redis.UniversalClient
	prefix  string
	timeout time.Duration
	ps      *redis.PubSub
	done    chan struct{}

	mu        sync.Mutex
	byChannel map[string]*hub
}

func newRelay(m *Manager, rdb redis.UniversalClient, prefix string, timeout time.Duration) *relay {
	r := &relay{m: m, rdb: rdb, prefix: prefix, timeout: max(timeout, 50*time.Millisecond),
		byChannel: map[string]*hub{}, done: make(chan struct{})}
	// go-redis makes the subscription again, with every channel, after a
	// lost connection; messages sent meanwhile are the gaps above.
	r.ps = rdb.Subscribe(m.ctx)
	ch := r.ps.Channel(redis.WithChannelSize(1024))
	go func() {
		defer close(r.done)
		for msg := range ch {
			r.deliver(msg)
		}
	}()
	return r
}

func (r *relay) close() {
	_ = r.ps.Close()
	<-r.done
}

// names are a stream's lease key and channel.
func (r *relay) names(h *hub) (lease, channel string) {
	sum := sha256.Sum256([]byte(h.key))
	id := hex.EncodeToString(sum[:16])
	return r.prefix + ":" + id + ":lease", r.prefix + ":" + id + ":events"
}

func (r *relay) deliver(pm *redis.Message) {
	r.mu.Lock()
	h := r.byChannel[pm.Channel]
	r.mu.Unlock()
	if h == nil {
		return
	}
	msg := new(message)
	if json.Unmarshal([]byte(pm.Payload), msg) != nil {
		return // not ours: the next message shows what is missing
	}
	select {
	case h.msgs <- msg:
	default: // the hub is behind: a gap it mends at the next message
	}
}

func (r *relay) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.timeout)
}

var renewScript = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) end return 0`)

var releaseScript = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0`)

// run is a hub's life in the fleet: it follows the channel and bids for
// the lease every third of it; holding it, it polls and publishes until
// it loses it or ctx ends.
func (r *relay) run(ctx context.Context, h *hub) {
	lease, channel := r.names(h)
	r.mu.Lock()
	r.byChannel[channel] = h
	r.mu.Unlock()
	_ = r.ps.Subscribe(ctx, channel)
	defer func() {
		r.mu.Lock()
		delete(r.byChannel, channel)
		r.mu.Unlock()
		uctx, cancel := r.call(context.WithoutCancel(ctx))
		_ = r.ps.Unsubscribe(uctx, channel)
		cancel()
	}()
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	token := hex.EncodeToString(tok[:])
	every := max(r.m.cfg.Lease/3, 100*time.Millisecond)
	for ctx.Err() == nil {
		cctx, cancel := r.call(ctx)
		won, err := r.rdb.SetNX(cctx, lease, token, r.m.cfg.Lease).Result()
		cancel()
		switch {
		case err == nil && won:
			r.m.metrics.tookLease(h.route)
			r.lead(ctx, h, lease, channel, token, every)
		case err != nil && ctx.Err() == nil:
			// Redis is unreachable: poll alone until the next bid.
			h.setLeading(true)
			r.alone(ctx, h, every)
			h.setLeading(false)
		default:
			r.follow(ctx, h, every)
		}
	}
}

// alone polls without Redis for one lease period.
func (r *relay) alone(ctx context.Context, h *hub, d time.Duration) {
	end := time.Now().Add(d)
	for ctx.Err() == nil && time.Now().Before(end) {
		wait := h.pollTimed(ctx, nil)
		r.drainOwn(h)
		if !sleep(ctx, max(min(wait, time.Until(end)), 0)) {
			return
		}
	}
}

// drainOwn drops messages that arrived while the hub polled itself.
func (r *relay) drainOwn(h *hub) {
	for {
		select {
		case <-h.msgs:
		default:
			return
		}
	}
}

// lead polls for the fleet while the lease is this replica's.
func (r *relay) lead(ctx context.Context, h *hub, lease, channel, token string, every time.Duration) {
	h.setLeading(true)
	defer h.setLeading(false)
	defer func() {
		// Handing over at once, rather than at the lease's end, when the
		// hub stops (its last subscriber left, or the replica stops).
		cctx, cancel := r.call(context.WithoutCancel(ctx))
		_ = releaseScript.Run(cctx, r.rdb, []string{lease}, token).Err()
		cancel()
	}()
	publish := func(from Pos, evs []*Event, next Pos) {
		msg := message{From: from.ID, Next: next.ID, Events: make([]wireEvent, len(evs))}
		for i, ev := range evs {
			msg.Events[i] = wireEvent{ID: ev.ID, Type: ev.Type, At: ev.At.UnixMilli(), Data: ev.Data}
		}
		b, err := json.Marshal(&msg)
		if err != nil {
			return
		}
		cctx, cancel := r.call(ctx)
		_ = r.rdb.Publish(cctx, channel, b).Err() // a lost message is a gap the others mend
		cancel()
	}
	poll := time.NewTimer(0)
	defer poll.Stop()
	renew := time.NewTicker(every)
	defer renew.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.msgs: // its own messages, and a former holder's last
		case <-renew.C:
			cctx, cancel := r.call(ctx)
			n, err := renewScript.Run(cctx, r.rdb, []string{lease}, token, r.m.cfg.Lease.Milliseconds()).Int()
			cancel()
			if err == nil && n == 0 {
				return // lost: another replica holds it now
			}
			// An error: Redis is unreachable, and the others poll alone
			// as this replica goes on doing.
		case <-poll.C:
			poll.Reset(h.pollTimed(ctx, publish))
		}
	}
}

// follow applies the holder's messages for one lease period.
func (r *relay) follow(ctx context.Context, h *hub, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			return
		case msg := <-h.msgs:
			h.apply(ctx, msg)
		}
	}
}

// apply adds a holder's message to the ring when it follows from an event
// the ring holds (or from the same nothing); otherwise a message was
// missed, and the events in between are read from pages first.
func (h *hub) apply(ctx context.Context, msg *message) {
	if h.applyChained(msg) {
		return
	}
	h.m.metrics.gap(h.route)
	for range h.m.cfg.CatchUpPages {
		pos := h.headPos()
		evs, next, _, err := h.src.read(ctx, pos)
		if err != nil {
			return // the next message tries again
		}
		h.add(evs, next)
		if h.applyChained(msg) || len(evs) == 0 {
			return
		}
	}
}

func (h *hub) applyChained(msg *message) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, chained := h.index[msg.From]
	if !chained && msg.From == "" {
		chained = h.head.ID == ""
	}
	// The events the ring holds already are skipped: those up to the last
	// of them, so that what is added keeps the stream's order. A message
	// that starts before the ring's events (a former holder that was
	// behind) may still reach into them.
	known := -1
	for i, w := range msg.Events {
		if _, in := h.index[w.ID]; in {
			known = i
		}
	}
	if !chained && known < 0 {
		return false
	}
	next := h.head
	if msg.Next != "" {
		next = Pos{ID: msg.Next}
	}
	fresh := &message{Events: msg.Events[known+1:]}
	h.addLocked(fresh.events(), next)
	if len(h.ring) > 0 {
		h.head = Pos{ID: h.ring[len(h.ring)-1].ID}
	}
	return true
}
