package stream

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Sink is a subscriber's connection as a front gives it: an HTTP/1.1
// connection taken over from fasthttp (ConnSink), or an HTTP/2 stream
// held open. Its methods are safe for concurrent use and never block.
type Sink interface {
	// Write queues p (copied) for the client and returns how many bytes
	// are queued and not yet handed to the connection, p included.
	Write(p []byte) (pending int, err error)
	// End sends what is queued, then ends the answer; a client that does
	// not take it within the write timeout is cut off.
	End()
	// Cut ends the answer at once, dropping what is queued.
	Cut()
}

// Listener is what a Sink tells its subscriber: Drained when what it had
// queued has gone to the connection, Gone once the client or the
// connection ended the stream. Both are cheap and never block; Gone is
// called once.
type Listener interface {
	Drained()
	Gone(err error)
}

// Reason is why a stream ended: the reason of its last `error` event, and
// the reason label of tradergate_stream_ended_total.
type Reason string

// The reasons a stream ends (docs/CONTRACT.md#streams).
const (
	// ReasonClientClosed: the client went away (no event is sent).
	ReasonClientClosed Reason = "client_closed"
	// ReasonSlowConsumer: the client read slower than events came, past
	// streams.buffer_bytes.
	ReasonSlowConsumer Reason = "slow_consumer"
	// ReasonTooFarBehind: catching up took more than
	// streams.catch_up_pages pages.
	ReasonTooFarBehind Reason = "too_far_behind"
	// ReasonShuttingDown: the replica is stopping; reconnect.
	ReasonShuttingDown Reason = "shutting_down"
	// ReasonKeyRevoked: a reload removed the key, or its right to the
	// route.
	ReasonKeyRevoked Reason = "key_revoked"
	// ReasonUpstream: the pages the stream reads failed in a way retrying
	// cannot mend (the legacy host refused the stream's request).
	ReasonUpstream Reason = "upstream_refused"
)

// Reasons lists every Reason, for the metrics' series.
var Reasons = []Reason{ReasonClientClosed, ReasonSlowConsumer, ReasonTooFarBehind, ReasonShuttingDown, ReasonKeyRevoked, ReasonUpstream}

var reasonMessages = map[Reason]string{
	ReasonSlowConsumer: "The client read slower than events arrived; reconnect with Last-Event-ID to resume after the last event received",
	ReasonTooFarBehind: "The stream was too far behind the live events; reconnect with Last-Event-ID to go on catching up",
	ReasonShuttingDown: "The server is restarting; reconnect with Last-Event-ID to resume",
	ReasonKeyRevoked:   "The API key was removed, or may no longer use this stream",
	ReasonUpstream:     "The upstream refused the stream's request",
}

// lowWater is how much a catching-up subscriber lets its sink hold
// before it waits for the connection to take it.
const lowWater = 32 << 10

// Subscriber is one client's stream.
type Subscriber struct {
	m      *Manager
	h      *hub
	route  string
	keyID  string
	key    [32]byte // the SHA-256 of the client's API key
	start  Pos
	pre    []*Event // read while the stream was opened, sent first
	prePos Pos      // where pre leaves the stream
	// budget is streams.buffer_bytes as the stream opened.
	budget int

	// wmu makes handing bytes to the sink and recording the last event
	// they carry one step as the end frame sees it: a sink may write to
	// the socket at once, so a client can read an event before the
	// writer records it, and an end frame naming the one before would
	// have the client take it again on resume. Taken before mu, never
	// while waiting on the client (sinks do not block).
	wmu    sync.Mutex
	lastID string // the last event handed to the sink (under wmu)

	mu        sync.Mutex
	sink      Sink
	attached  bool // fed by its hub (under the hub's lock)
	ended     bool
	reason    Reason
	lastWrite atomic.Int64 // Unix ns of the last write, for heartbeats
	drained   chan struct{}
	done      chan struct{} // closed once the stream has ended
	released  sync.Once
	gone      chan struct{} // closed once its Sink has closed (Gone)
	goneOnce  sync.Once
	opened    time.Time // when Open returned it
	// cancel stops the catch-up.
	ctx    context.Context
	cancel context.CancelFunc
}

// Route is the stream's route name.
func (s *Subscriber) Route() string { return s.route }

// Done is closed once the stream has ended.
func (s *Subscriber) Done() <-chan struct{} { return s.done }

// Drained is the Sink's signal that its queue went to the connection.
func (s *Subscriber) Drained() {
	select {
	case s.drained <- struct{}{}:
	default:
	}
}

// Gone is the Sink's signal that the stream ended on its side: its
// connection is closed, or its HTTP/2 stream.
func (s *Subscriber) Gone(error) {
	s.goneOnce.Do(func() { close(s.gone) })
	s.finish(ReasonClientClosed, false)
}

// Start begins sending on sink: the retry hint, what was read while the
// stream opened, then the catch-up to the live events. The front calls
// it once its connection is ready for the body.
func (s *Subscriber) Start(sink Sink) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		sink.Cut()
		return
	}
	s.sink = sink
	// Counted under s.mu: Shutdown ends every stream (under s.mu) before
	// it waits for the catch-ups.
	s.m.wg.Add(1)
	s.mu.Unlock()
	s.write(retryFrame(s.m.cfg.Retry), "", false)
	// The front's goroutine returns at once: a catch-up may wait on the
	// client.
	go func() {
		defer s.m.wg.Done()
		pre := s.pre
		s.pre = nil
		for _, ev := range pre {
			if !s.sendCaughtUp(ev) {
				return
			}
		}
		s.catchUp(s.prePos)
	}()
}

// Abandon releases a stream the front could not start.
func (s *Subscriber) Abandon() { s.finish(ReasonClientClosed, false) }

// write hands p to the sink, and records id (when set) as the last event
// sent: it reports the bytes the sink now holds, when the write was made
// (for a p not empty; the clock is read once, for the heartbeat and the
// lag alike), and false once the stream has ended (a sink that failed
// ends it, as the client's doing).
func (s *Subscriber) write(p []byte, id string, hubLocked bool) (pending int, at time.Time, ok bool) {
	s.wmu.Lock()
	s.mu.Lock()
	sink, ended := s.sink, s.ended
	s.mu.Unlock()
	if ended || sink == nil {
		s.wmu.Unlock()
		return 0, at, false
	}
	n, err := sink.Write(p)
	if err == nil && id != "" {
		s.lastID = id
	}
	s.wmu.Unlock()
	if err != nil {
		s.finishFrom(ReasonClientClosed, false, hubLocked)
		return 0, at, false
	}
	if len(p) > 0 {
		at = s.m.now()
		s.lastWrite.Store(at.UnixNano())
	}
	return n, at, true
}

// send writes one event of a catch-up and reports the bytes the sink
// holds, and whether the stream goes on.
func (s *Subscriber) send(ev *Event) (int, bool) {
	if ev.frame == nil {
		return 0, true // an anchor: the event a stream started after
	}
	n, at, ok := s.write(ev.frame, ev.ID, false)
	if !ok {
		return 0, false
	}
	s.m.metrics.delivered(s.route, at.Sub(ev.At))
	return n, true
}

// sendLive writes a read's new events from the hub, under its lock, and
// reports whether the stream goes on: past the budget it ends as slow.
// The events delivered are counted in t, which the caller adds to the
// metrics once for many subscribers.
func (s *Subscriber) sendLive(b *batch, t *tally) bool {
	n, at, ok := s.write(b.frame, b.evs[len(b.evs)-1].ID, true)
	if !ok {
		return false
	}
	for _, ev := range b.evs {
		t.observe(at.Sub(ev.At))
	}
	if n > s.budget {
		s.finishFrom(ReasonSlowConsumer, true, true)
		return false
	}
	return true
}

// sendCaughtUp sends one event of a catch-up, waiting for the sink when
// it holds more than lowWater.
func (s *Subscriber) sendCaughtUp(ev *Event) bool {
	n, ok := s.send(ev)
	return ok && s.waitDrained(n)
}

// heartbeat sends a comment when nothing was written for the heartbeat
// interval.
func (s *Subscriber) heartbeat(now time.Time, every time.Duration) {
	// Looked at every janitorEvery: within half of it counts as due.
	if now.UnixNano()-s.lastWrite.Load() >= int64(every-janitorEvery/2) {
		s.write(frameComment, "", false)
	}
}

// end ends the stream from the edge's side: its last `error` event says
// why, then the sink sends what it holds and ends.
func (s *Subscriber) end(r Reason) { s.finish(r, true) }

func (s *Subscriber) finish(r Reason, tell bool) { s.finishFrom(r, tell, false) }

// finishFrom ends the stream once. hubLocked: the caller holds the hub's
// lock, and detaches the subscriber itself.
func (s *Subscriber) finishFrom(r Reason, tell, hubLocked bool) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended, s.reason = true, r
	sink := s.sink
	s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
	if sink != nil {
		if tell {
			// Once ended is set no write starts; one under way holds wmu
			// until its event is recorded, so last is what the client got.
			s.wmu.Lock()
			last := s.lastID
			if r == ReasonShuttingDown {
				_, _ = sink.Write(retryFrame(s.m.cfg.Retry))
			}
			_, _ = sink.Write(endFrame(r, reasonMessages[r], last))
			s.wmu.Unlock()
			sink.End()
		} else {
			sink.Cut()
		}
	}
	s.released.Do(func() {
		if s.h != nil && !hubLocked {
			s.h.detach(s)
		}
		s.m.release(s, r)
		close(s.done)
	})
}

// waitDrained waits until the sink holds at most lowWater; a sink that
// takes nothing for the write timeout ends the stream as slow.
func (s *Subscriber) waitDrained(pending int) bool {
	if pending <= lowWater {
		return true
	}
	t := time.NewTimer(s.m.cfg.WriteTimeout)
	defer t.Stop()
	for {
		select {
		case <-s.drained:
			n, _, ok := s.write(nil, "", false)
			if !ok {
				return false
			}
			if n <= lowWater {
				return true
			}
		case <-s.ctx.Done():
			return false
		case <-t.C:
			s.end(ReasonSlowConsumer)
			return false
		}
	}
}

// catchUp brings the stream from pos to its hub's live events: from the
// hub's recent events when pos is among them, else from pages read
// through the cache, until the last event sent is the hub's newest, when
// the hub takes the stream over (hub.next attaches it).
func (s *Subscriber) catchUp(pos Pos) {
	h := s.h
	pages := 0
	// waitHub: the last read reached the end of the pages, so pos is as
	// new as the legacy host's events, newer than the hub's newest when
	// the hub's last poll came before that read. Reading on would chase
	// the new events a page at a time, each page a legacy call, and never
	// meet the hub when pages take longer than events come; the stream
	// waits for the hub's next poll to reach pos instead.
	waitHub := false
	for s.ctx.Err() == nil {
		evs, attached, wake := h.next(s, pos)
		if attached {
			return
		}
		if len(evs) > 0 {
			for _, ev := range evs {
				if !s.sendCaughtUp(ev) {
					return
				}
			}
			pos = Pos{ID: evs[len(evs)-1].ID}
			continue
		}
		if waitHub {
			// pos is not among the hub's events yet: wait for its ring to
			// grow (or a poll interval, for a hub that found nothing new),
			// then look again before reading another page.
			waitHub = false
			select {
			case <-wake:
			case <-time.After(h.interval()):
			case <-s.ctx.Done():
				return
			}
			continue
		}
		// pos is not among the hub's events: read on from pages.
		read, next, more, err := h.src.read(s.ctx, pos)
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			if permanent(err) {
				s.end(ReasonUpstream)
				return
			}
			if !sleep(s.ctx, h.interval()) {
				return
			}
			continue
		}
		// An empty read at the end of the pages does not count against
		// catch_up_pages: it waits for the hub.
		if len(read) > 0 || more {
			if pages++; pages > s.m.cfg.CatchUpPages {
				s.end(ReasonTooFarBehind)
				return
			}
		}
		for _, ev := range read {
			if !s.sendCaughtUp(ev) {
				return
			}
		}
		pos = next
		waitHub = !more
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
