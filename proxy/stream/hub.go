package stream

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"
)

// hub is one canonical stream on this replica (a route and its canonical
// filters): every subscriber of it shares the hub's reads. It keeps the
// stream's recent events (the ring), each once, and hands each new one to
// every subscriber attached to it.
//
// Its events come from one of three places (run): its own polls, without
// Redis; its own polls published to the other replicas, while it holds
// the stream's lease; or the holder's messages through Redis, while
// another replica holds it (fleet.go).
type hub struct {
	m     *Manager
	key   string // the canonical stream: route, path parameter, filters
	route string
	src   source

	mu    sync.Mutex
	ring  []*Event // oldest first; ring[i] is event number first+i
	first uint64
	index map[string]uint64 // id -> number, for every event in ring
	head  Pos               // where the next read starts
	subs  map[*Subscriber]struct{}
	// fan holds subs in a slice while a read is handed to them
	// (sendLocked).
	fan []*Subscriber
	// wake is closed, and replaced, whenever events are added: what
	// catching-up subscribers wait on.
	wake chan struct{}
	// ready is closed once head is known (or its first reading failed,
	// with readErr set, while the hub goes on trying).
	ready   chan struct{}
	isReady bool
	readErr error
	leading bool // this replica polls the stream (no Redis, or the lease)

	// Under m.mu: subscribers counted (attached or not), and since when
	// there are none.
	refs      int
	idleSince time.Time

	cancel context.CancelFunc
	done   chan struct{}
	msgs   chan *message // the holder's messages (fleet.go)
	// lastRead is when the last poll's read returned, by the manager's
	// clock; only the hub's goroutine polls.
	lastRead time.Time
}

func newHub(m *Manager, key, route string, src source) *hub {
	return &hub{
		m: m, key: key, route: route, src: src,
		index: map[string]uint64{},
		subs:  map[*Subscriber]struct{}{},
		wake:  make(chan struct{}),
		ready: make(chan struct{}),
		done:  make(chan struct{}),
		msgs:  make(chan *message, 64),
	}
}

// interval is the route's poll interval: streams.routes.<route>.poll,
// never below the route's fresh TTL.
func (h *hub) interval() time.Duration { return h.m.pollInterval(h.route) }

// waitReady waits until the hub knows where the stream stands, or its
// first reading failed (that error), or ctx ends.
func (h *hub) waitReady(ctx context.Context) error {
	select {
	case <-h.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.isReady {
		return nil
	}
	return h.readErr
}

// start sets the stream's head: the ring begins with the id-only anchor
// the stream starts after.
func (h *hub) start(pos Pos) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.head = pos
	if pos.ID != "" {
		h.appendLocked(anchor(pos.ID))
	}
	h.isReady, h.readErr = true, nil
	h.signalReadyLocked()
}

func (h *hub) failedStart(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.readErr = err
	h.signalReadyLocked()
}

func (h *hub) signalReadyLocked() {
	select {
	case <-h.ready:
	default:
		close(h.ready)
	}
}

// has reports whether id is among the ring's events, and its number.
func (h *hub) has(id string) (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, ok := h.index[id]
	return n, ok
}

// catchUpBatch is how many of the ring's events a catching-up subscriber
// takes at a time.
const catchUpBatch = 64

// next serves a catching-up subscriber at pos: when pos is the ring's
// newest event, s is attached (attached true: the hub sends it every
// event from now on); when it is an older event of the ring, the next
// ones (up to catchUpBatch); when it is not in the ring, nothing, and the
// channel closed when the ring next grows.
func (h *hub) next(s *Subscriber, pos Pos) (evs []*Event, attached bool, wake <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, ok := h.index[pos.ID]
	if !ok {
		if pos.ID == "" && !pos.HasFrom {
			ok, n = true, h.first+uint64(len(h.ring))-1
		} else {
			return nil, false, h.wake
		}
	}
	end := h.first + uint64(len(h.ring))
	if n+1 >= end {
		s.mu.Lock()
		ended := s.ended
		s.attached = !ended
		s.mu.Unlock()
		if !ended {
			h.subs[s] = struct{}{}
		}
		return nil, true, nil
	}
	from := n + 1 - h.first
	to := min(uint64(len(h.ring)), from+catchUpBatch)
	return append([]*Event(nil), h.ring[from:to]...), false, nil
}

// detach forgets s.
func (h *hub) detach(s *Subscriber) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// appendLocked adds one event to the ring, dropping the oldest past
// streams.history.
func (h *hub) appendLocked(ev *Event) {
	h.index[ev.ID] = h.first + uint64(len(h.ring))
	h.ring = append(h.ring, ev)
	if over := len(h.ring) - h.m.cfg.History; over > 0 {
		for _, old := range h.ring[:over] {
			delete(h.index, old.ID)
		}
		clear(h.ring[:over])
		h.ring = h.ring[over:]
		h.first += uint64(over)
	}
}

// add puts new events in the ring and sends them to every attached
// subscriber, in order; next is the head after them. An event already in
// the ring (a message that overlaps what a repair read) is skipped.
func (h *hub) add(evs []*Event, next Pos) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.addLocked(evs, next)
}

// addLocked hands a read's new events to each subscriber at once, as one
// write: their frames joined once for all of them. One write per event
// would cost each subscriber as many queued writes and write calls as
// the read has events, and the last of thousands of subscribers would
// get the first event only after every other had been handed all of
// them (docs/BENCHMARKS.md, Fanout).
func (h *hub) addLocked(evs []*Event, next Pos) {
	h.head = next
	var fresh []*Event
	added, size := 0, 0
	for _, ev := range evs {
		if _, dup := h.index[ev.ID]; dup {
			continue
		}
		h.appendLocked(ev)
		added++
		if ev.frame != nil { // not an anchor
			fresh = append(fresh, ev)
			size += len(ev.frame)
		}
	}
	if added == 0 {
		return
	}
	if len(fresh) > 0 {
		b := batch{evs: fresh, frame: fresh[0].frame}
		if len(fresh) > 1 {
			b.frame = make([]byte, 0, size)
			for _, ev := range fresh {
				b.frame = append(b.frame, ev.frame...)
			}
		}
		h.sendLocked(&b)
	}
	close(h.wake)
	h.wake = make(chan struct{})
}

// fanShard is the fewest subscribers a goroutine of a hand-off takes:
// below two shards of it, the hub's own goroutine hands a read to every
// subscriber, as starting and waiting for another costs more than a few
// hundred writes save.
const fanShard = 256

// sendLocked hands b to every attached subscriber and detaches those whose
// stream ended (released by their own end). Past two fanShards of
// subscribers, they are split in up to GOMAXPROCS shards, each handed b on
// its own goroutine, the first on the hub's: at about 14 µs a connection
// (most of it the kernel's write), 10,000 subscribers on one goroutine are
// 140 ms of a poll's lag (docs/BENCHMARKS.md, Fanout). It returns once
// every shard is done, so each subscriber is handed a read's events after
// the previous read's and before the next, and a subscriber is in one
// shard only: its writes stay in order. Concurrent with each other,
// sendLive calls touch their own subscriber and sink, the manager under
// its lock (release) and the metrics, which are safe for it; the shards
// collect the subscribers that ended, and the map is changed after.
func (h *hub) sendLocked(b *batch) {
	all := h.fan[:0]
	for s := range h.subs {
		all = append(all, s)
	}
	n := len(all)
	if shards := max(min(runtime.GOMAXPROCS(0), n/fanShard), 1); shards == 1 {
		h.forgetLocked(h.sendShard(all, b))
	} else {
		per := (n + shards - 1) / shards
		ended := make([][]*Subscriber, shards)
		var wg sync.WaitGroup
		for i := 1; i < shards; i++ {
			wg.Go(func() { ended[i] = h.sendShard(all[i*per:min((i+1)*per, n)], b) })
		}
		ended[0] = h.sendShard(all[:per], b)
		wg.Wait()
		for _, e := range ended {
			h.forgetLocked(e)
		}
	}
	clear(all) // the slice is kept for the next read, not its subscribers
	h.fan = all[:0]
}

// forgetLocked forgets the subscribers whose stream ended (each released
// by its own end).
func (h *hub) forgetLocked(ended []*Subscriber) {
	for _, s := range ended {
		delete(h.subs, s)
	}
}

// sendShard hands b to subs and returns those whose stream ended.
func (h *hub) sendShard(subs []*Subscriber, b *batch) (ended []*Subscriber) {
	var t tally
	for _, s := range subs {
		if !s.sendLive(b, &t) {
			ended = append(ended, s)
		}
	}
	h.m.metrics.add(h.route, &t)
	return ended
}

// batch is the events a read added, and their frames joined.
type batch struct {
	evs   []*Event
	frame []byte
}

// headPos is where the next read starts.
func (h *hub) headPos() Pos {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.head
}

// run is the hub's goroutine: it finds the head, then polls (alone, or
// for the fleet while it holds the lease) or follows the holder's
// messages, until stopped.
func (h *hub) run(ctx context.Context) {
	defer close(h.done)
	backoff := h.interval()
	for {
		pos, err := h.src.head(ctx)
		if err == nil {
			h.start(pos)
			break
		}
		if ctx.Err() != nil {
			return
		}
		h.m.logReadFailed(h, err)
		h.failedStart(err)
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, time.Minute)
	}
	if h.m.relay == nil {
		h.setLeading(true)
		h.pollLoop(ctx, nil)
		return
	}
	h.m.relay.run(ctx, h)
}

func (h *hub) setLeading(on bool) {
	h.mu.Lock()
	h.leading = on
	h.mu.Unlock()
}

// maxReadsPerPoll bounds the pages one poll reads when more keep coming:
// the rest waits for the next poll.
const maxReadsPerPoll = 10

// pollLoop polls every interval until ctx ends or, with a stop channel,
// until stop is closed (the lease was lost). publish, when set, hands
// each poll's result to the other replicas before it is sent here.
func (h *hub) pollLoop(ctx context.Context, publish func(from Pos, evs []*Event, next Pos)) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(h.pollTimed(ctx, publish))
	}
}

// pollTimed polls once and returns how long to wait for the next poll:
// the interval counts from the poll's start, as the time a poll takes to
// read and to hand its events to thousands of subscribers must not
// stretch the interval (it made 0.6 polls a second of 1 s at 10,000
// subscribers), nor the lag of the next events with it.
func (h *hub) pollTimed(ctx context.Context, publish func(from Pos, evs []*Event, next Pos)) time.Duration {
	start := time.Now()
	h.pollOnce(ctx, publish)
	return max(h.interval()-time.Since(start), 0)
}

// pollOnce reads from the head until no more pages follow at once (at
// most maxReadsPerPoll), publishing and adding each read.
func (h *hub) pollOnce(ctx context.Context, publish func(from Pos, evs []*Event, next Pos)) {
	for range maxReadsPerPoll {
		from := h.headPos()
		// A page cached before the last poll's read returned is at most
		// what that read saw: the poll must not take it (Since).
		evs, next, more, err := h.src.read(withSince(ctx, h.lastRead), from)
		h.lastRead = h.m.now()
		h.m.metrics.polled(h.route)
		if err != nil {
			if ctx.Err() == nil {
				h.m.logReadFailed(h, err)
			}
			return
		}
		if publish != nil {
			publish(from, evs, next)
		}
		h.add(evs, next)
		if !more {
			return
		}
	}
}

// permanent reports whether a read failed for good: the legacy host
// refused the request as the client's (a 4xx with its message), which a
// retry would meet again.
func permanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}
