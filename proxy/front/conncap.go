package front

import (
	"log/slog"
	"math"
	"net"
	"net/netip"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// The cap on open client connections (server.max_connections and
// server.max_connections_per_address), on the client listener, under both
// fronts: a TLS connection holds its slot from before its handshake until
// it closes, whichever front then serves it.
//
// At the total cap the listener stops accepting until a connection closes:
// new connections wait in the kernel's backlog, and past it their SYNs go
// unanswered, so a client sees a slow connect, never a dropped request.
// Closing the oldest idle connection instead would need an idle list kept
// across fasthttp's and h2edge's connections, and would race with a
// request arriving on the one chosen; an idle connection frees its slot by
// itself within server.idle_timeout. One address past its own cap has its
// new connection closed at once, so that a single client cannot hold the
// listener paused for everyone.

// connBudget is what the default cap allows for each client connection: an
// idle connection costs less (docs/BENCHMARKS.md, "Idle connections"), a
// busy one holds its read and write buffers, its TLS records and its
// goroutine's stack.
const connBudget = 64 << 10

// minMaxConnections is the floor of the default cap.
const minMaxConnections = 1024

// defaultMaxConnections is the cap a zero server.max_connections means:
// a quarter of the memory limit, at connBudget per connection, and never
// below minMaxConnections.
func defaultMaxConnections(memoryLimit int64) int {
	return max(minMaxConnections, int(min(memoryLimit/4/connBudget, math.MaxInt32)))
}

// connLimits is the cap in force: the configured figures with their
// defaults filled in. memoryLimit is the Go memory limit of the process
// (math.MaxInt64 when none is set; main sets it before New, from
// GOMEMLIMIT, server.memory_limit or a container's limit), which the
// default derives from; without one, sized: what server.memory_limit
// asks for, its default filled in (Options.MemoryLimit).
func connLimits(c Config, memoryLimit, sized int64) (total, perAddr int) {
	total = c.MaxConnections
	if total == 0 {
		if memoryLimit <= 0 || memoryLimit == math.MaxInt64 {
			memoryLimit = sized
		}
		total = defaultMaxConnections(memoryLimit)
	}
	switch perAddr = c.MaxConnectionsPerAddress; perAddr {
	case 0:
		perAddr = max(1, total/4)
	case -1:
		perAddr = 0 // none
	}
	return total, perAddr
}

// Every client connection holds a descriptor, so the cap is only reached
// if the descriptor limit (RLIMIT_NOFILE) leaves room for it; past that,
// accepts fail with EMFILE first, and are retried (capListener.Accept).
// Go raises the soft limit to the hard one as the process starts (since
// Go 1.19, package os), so the limit read here is already the highest the
// process may have: what is short can only be raised outside it (ulimit
// -n, systemd's LimitNOFILE, the container runtime's).
//
// Of the limit, page files may take a quarter (cache/files.go), and
// nofileReserve is kept for the rest: the upstream pool (256 idle by
// default, upstream.max_idle_conns) and what a request in flight opens
// to the legacy host, the listeners, the admin listener's connections,
// logs.
const nofileReserve = 512

// nofileRoom is how many client connections a descriptor limit of soft
// leaves room for.
func nofileRoom(soft uint64) uint64 {
	rest := soft - soft/4
	if rest <= nofileReserve {
		return 0
	}
	return rest - nofileReserve
}

// checkNofile warns when the cap on client connections is above what the
// process's descriptor limit leaves room for.
func checkNofile(total int, log *slog.Logger) {
	soft, ok := nofileLimit()
	if !ok {
		return
	}
	if room := nofileRoom(soft); uint64(total) > room {
		log.Warn("client connections: server.max_connections is above what the descriptor limit (RLIMIT_NOFILE) leaves "+
			"room for; past that, accepts fail with EMFILE and are retried until a connection closes. "+
			"Raise the limit (ulimit -n, systemd's LimitNOFILE) or lower server.max_connections",
			"max_connections", total, "nofile_limit", soft, "room", room)
	}
}

// processMemoryLimit is the Go memory limit in force, math.MaxInt64 when
// none is.
func processMemoryLimit() int64 { return debug.SetMemoryLimit(-1) }

// connCap counts the open client connections. Its counters are read by
// the metrics (Edge.Collectors).
type connCap struct {
	total   int
	perAddr int // 0: none
	log     *slog.Logger

	// slots holds an element per open connection, and one for the
	// connection the listener waits to accept: a slot is taken before
	// accepting, so that at the cap nothing is accepted.
	slots chan struct{}
	conns atomic.Int64 // open connections

	mu     sync.Mutex
	byAddr map[netip.Addr]int

	waits     atomic.Uint64 // accepts that found the cap reached
	waitNanos atomic.Int64  // time spent paused at the cap, waits ended
	// waitingSince is when the wait under way began (unix nanos), 0 when
	// the listener is not waiting.
	waitingSince atomic.Int64
	refused      atomic.Uint64 // connections closed over the per-address cap
	// The unix nanos of the last warning of each kind.
	lastFull, lastAddr atomic.Int64
}

func newConnCap(total, perAddr int, log *slog.Logger) *connCap {
	return &connCap{total: total, perAddr: perAddr, log: log,
		slots: make(chan struct{}, total), byAddr: map[netip.Addr]int{}}
}

// open is how many client connections are open.
func (c *connCap) open() int64 { return c.conns.Load() }

// warn logs a line at most once every period: a client can make the
// edge reach its cap, or run out of descriptors, as often as it likes.
func (c *connCap) warn(lastLog *atomic.Int64, every time.Duration, msg string, args ...any) {
	warnEvery(c.log, lastLog, every, msg, args...)
}

// warnEvery logs msg unless it did within every, by the unix nanos of
// its last time in lastLog.
func warnEvery(log *slog.Logger, lastLog *atomic.Int64, every time.Duration, msg string, args ...any) {
	now := time.Now().UnixNano()
	last := lastLog.Load()
	if now-last < int64(every) || !lastLog.CompareAndSwap(last, now) {
		return
	}
	log.Warn(msg, args...)
}

// acquire takes a slot for a connection about to be accepted, waiting
// while every slot is taken; false once done is closed.
func (c *connCap) acquire(done <-chan struct{}) bool {
	select {
	case c.slots <- struct{}{}:
		return true
	default:
	}
	c.waits.Add(1)
	c.warn(&c.lastFull, time.Minute, "client connections: the cap is reached, accepting paused until one closes",
		"max_connections", c.total)
	start := time.Now()
	c.waitingSince.Store(start.UnixNano())
	defer func() {
		c.waitNanos.Add(int64(time.Since(start)))
		c.waitingSince.Store(0)
	}()
	select {
	case c.slots <- struct{}{}:
		return true
	case <-done:
		return false
	}
}

// waited is the time the listener has spent paused at the cap, the wait
// under way included, so that a pause that lasts shows as it goes.
func (c *connCap) waited() time.Duration {
	d := c.waitNanos.Load()
	if since := c.waitingSince.Load(); since != 0 {
		d += max(0, time.Now().UnixNano()-since)
	}
	return time.Duration(d)
}

// release gives a slot back.
func (c *connCap) release() { <-c.slots }

// admit counts a connection from addr against the per-address cap;
// false (and nothing counted) when addr already holds its cap.
func (c *connCap) admit(addr netip.Addr) bool {
	if c.perAddr == 0 || !addr.IsValid() {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byAddr[addr] >= c.perAddr {
		return false
	}
	c.byAddr[addr]++
	return true
}

// leave undoes admit.
func (c *connCap) leave(addr netip.Addr) {
	if c.perAddr == 0 || !addr.IsValid() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.byAddr[addr]; n > 1 {
		c.byAddr[addr] = n - 1
	} else {
		delete(c.byAddr, addr)
	}
}

// capListener is the client listener under the cap: Accept waits for a
// slot before it accepts (retrying as every listener of the edge does,
// acceptretry.go), and closes at once a connection whose address holds
// its cap.
type capListener struct {
	*retryListener
	cap *connCap
}

func (c *connCap) listen(ln *retryListener) *capListener {
	return &capListener{retryListener: ln, cap: c}
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		if !l.cap.acquire(l.done) {
			return nil, net.ErrClosed
		}
		c, err := l.retryListener.Accept()
		if err != nil {
			l.cap.release()
			return nil, err
		}
		addr := peerAddr(c.RemoteAddr())
		if !l.cap.admit(addr) {
			_ = c.Close()
			l.cap.release()
			l.cap.refused.Add(1)
			l.cap.warn(&l.cap.lastAddr, time.Minute, "client connections: an address is past its cap; its new connections are closed",
				"remote", addr.String(), "max_connections_per_address", l.cap.perAddr)
			continue
		}
		l.cap.conns.Add(1)
		s := &connSlot{cap: l.cap, addr: addr}
		if tcp, ok := c.(*net.TCPConn); ok {
			return &capConn{TCPConn: tcp, slot: s}, nil
		}
		return &capOtherConn{Conn: c, slot: s}, nil
	}
}

// connSlot is one connection's hold on the cap, given back once.
type connSlot struct {
	cap  *connCap
	addr netip.Addr
	done atomic.Bool
}

// release gives the slot back; a nil slot (a connection accepted without
// the cap, as in tests that hand a front a listener of their own) holds
// nothing.
func (s *connSlot) release() {
	if s == nil || !s.done.CompareAndSwap(false, true) {
		return
	}
	s.cap.conns.Add(-1)
	s.cap.leave(s.addr)
	s.cap.release()
}

// capConn is a capped TCP connection. It embeds the *net.TCPConn, so that
// the front (front_conn.go) can take the socket for sendfile.
type capConn struct {
	*net.TCPConn
	slot *connSlot
}

func (c *capConn) Close() error {
	err := c.TCPConn.Close()
	c.slot.release()
	return err
}

// capOtherConn is a capped connection of another kind (a test's
// listener).
type capOtherConn struct {
	net.Conn
	slot *connSlot
}

func (c *capOtherConn) Close() error {
	err := c.Conn.Close()
	c.slot.release()
	return err
}
