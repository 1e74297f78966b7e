package h2edge

import (
	"net/netip"
	"time"
)

// Why a connection ended, as Server.ConnClosed is told (CloseReasons
// lists them all), and why a stream was cut short (Server.StreamCut).
const (
	// ReasonClient: the client closed the connection, sent GOAWAY, or
	// the connection broke.
	ReasonClient = "client"
	// ReasonIdle: no stream and no DATA for IdleTimeout.
	ReasonIdle = "idle"
	// ReasonShutdown: Shutdown or Close.
	ReasonShutdown = "shutdown"
	// ReasonProtocol: a connection error (RFC 9113 section 5.4.1),
	// a SETTINGS frame of more than 100 parameters among them.
	ReasonProtocol = "protocol_error"
	// ReasonReadTimeout: the read deadline passed with the client in the
	// middle of a frame or a header block.
	ReasonReadTimeout = "read_timeout"
	// ReasonSlowReader: the client did not read what it asked for (the
	// write buffer's bound, WriteTimeout).
	ReasonSlowReader = "slow_reader"
	// ReasonFlood: frames that do no work past the flood budget, or a
	// header block of empty CONTINUATION frames (ENHANCE_YOUR_CALM).
	ReasonFlood = "flood"
	// ReasonRapidReset: the flood budget spent by resetting streams
	// before their answer (ENHANCE_YOUR_CALM).
	ReasonRapidReset = "rapid_reset"
	// ReasonHeaderBudget: the flood budget spent by requests past
	// MaxPendingHeaderBytes (ENHANCE_YOUR_CALM); as a stream's reason, one
	// such request (answered at once, TooLarge).
	ReasonHeaderBudget = "header_budget"
	// ReasonRequestTimeout, a stream's reason: its request did not end
	// within RequestTimeout, and it was reset (CANCEL).
	ReasonRequestTimeout = "request_timeout"
)

// CloseReasons are the reasons ConnClosed may be given.
func CloseReasons() []string {
	return []string{
		ReasonClient, ReasonIdle, ReasonShutdown, ReasonProtocol, ReasonReadTimeout,
		ReasonSlowReader, ReasonFlood, ReasonRapidReset, ReasonHeaderBudget,
	}
}

// StreamCutReasons are the reasons StreamCut may be given.
func StreamCutReasons() []string { return []string{ReasonRequestTimeout, ReasonHeaderBudget} }

// The flood budget. Each frame that makes the server work for nothing
// (PING, SETTINGS, PRIORITY, an unknown type, an empty DATA frame, an
// empty CONTINUATION, a WINDOW_UPDATE for a closed stream, a stream
// error, a request past the header budget, a stream reset before its
// answer) adds to a connection's score; each answer sent takes one off,
// down to -floodCredit, and each floodRefill that passes takes one off a
// positive score (a PING every few seconds on a long connection costs
// nothing). Past floodLimit the connection is told ENHANCE_YOUR_CALM and
// closed, as nginx does with its own counts. So a client that only
// resets the streams it opens is closed within about floodLimit resets,
// and one that first had floodCredit answers within about
// floodLimit+floodCredit.
const (
	floodLimit  = 200
	floodCredit = 500
	floodRefill = time.Second
)

// A client gives back the window of an answer as it reads it, and those
// WINDOW_UPDATEs may reach the server after the stream has closed (Go's
// client sends one for each 4 KiB read). They are free while they give
// back no more than the closed streams were sent and had not given back
// (closedWindow, counted as each stream closes), each counted as at least
// closedWindowMin, so that a client that reads in small steps pays for
// them; past that each adds to the flood score. There is no cap: what
// is free was sent to the client, which costs the server more than the
// updates that give it back, and a cap cut off clients that read many
// large answers at once.
const closedWindowMin = 1 << 10

// calmError ends a connection with ENHANCE_YOUR_CALM.
type calmError struct{ reason string }

func (e calmError) Error() string { return "h2edge: flood budget spent: " + e.reason }

// spendReasons are the reasons a connection's flood budget is spent
// for; conn.spent counts by them, in this order.
var spendReasons = [...]string{ReasonFlood, ReasonRapidReset, ReasonHeaderBudget}

// uselessLocked adds n to the flood score, for reason; past the limit it
// returns the error that ends the connection, for the reason that spent
// most of the score since it was last at or below zero. A client that
// mixes frames (a PING now and then among requests past the header
// budget, say) is named for what it mostly did, not for the frame that
// happened to come last.
func (c *conn) uselessLocked(n int, reason string) error {
	now := time.Now()
	if c.floodAt.IsZero() {
		c.floodAt = now
	}
	if k := int(now.Sub(c.floodAt) / floodRefill); k > 0 {
		c.floodAt = now
		if c.flood > 0 {
			c.flood = max(c.flood-k, 0)
		}
	}
	if c.flood <= 0 {
		c.spent = [len(spendReasons)]int{}
	}
	c.flood += n
	at := 0
	for i, r := range spendReasons {
		if r == reason {
			c.spent[i] += n
			at = i
		}
	}
	if c.flood <= floodLimit {
		return nil
	}
	for i, v := range c.spent { // ties go to this frame's reason
		if v > c.spent[at] {
			at = i
		}
	}
	return calmError{spendReasons[at]}
}

// usefulLocked: an answer was sent whole.
func (c *conn) usefulLocked() {
	if c.flood > -floodCredit {
		c.flood--
	}
}

// logEvery spaces the log lines about cut connections: a flood of them
// is itself worth one line a second, not one a connection.
const logEvery = time.Second

// logCut logs a connection cut for abuse, at most once per logEvery, with
// how many were not logged since.
func (s *Server) logCut(peer netip.Addr, reason string) {
	if s.Log == nil {
		return
	}
	s.logMu.Lock()
	now := time.Now()
	if now.Before(s.logNext) {
		s.logSkipped++
		s.logMu.Unlock()
		return
	}
	skipped := s.logSkipped
	s.logSkipped, s.logNext = 0, now.Add(logEvery)
	s.logMu.Unlock()
	s.Log.Warn("h2edge: connection cut", "remote", peer.String(), "reason", reason, "not_logged_since", skipped)
}

func (s *Server) connClosed(reason string) {
	if s.ConnClosed != nil {
		s.ConnClosed(reason)
	}
}

func (s *Server) streamCut(reason string) {
	if s.StreamCut != nil {
		s.StreamCut(reason)
	}
}
