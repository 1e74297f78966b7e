package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"time"

	_ "embed"

	"tradergate/bench/cpustat"
	"tradergate/bench/fixture"
)

// The fanout rows (-only fanout): N subscribers of one order book stream
// over plain HTTP/1.1, against the edge and against Nchan (nginx's
// pub/sub module) fed the same events by a publisher in the harness. The
// legacy host is a simulator in live mode: each token's order book
// changes about every fanoutBookEvery. Per point (server, N) the harness
// starts a fresh server, opens the N streams from its own process, lets
// them settle, and measures over -fanout-window: the legacy host's calls
// for order book events (the edge's poller, or the publisher's: the same
// for 1 and 10,000 subscribers if the stream is shared), the server's CPU
// time over the events it delivered, its RSS per subscriber (below), and
// the delivery lag, from an event's timestamp (when the simulated host
// made it visible) to its arrival at a subscriber. That lag holds the
// poll's phase, 0 to one interval alike for every subscriber; the spread,
// an event's arrival after its first arrival at any subscriber, is the
// fanout's share alone. An HTTP/1.1 subscriber's arrival is when the
// event's bytes reached its socket, the kernel's receive timestamp
// (arrival.go), not when its reader goroutine parsed them: the readers
// share the harness's CPU, and their wait for it is the harness's share.
// The lag and spread from the reader's parse (read lag, read spread) are
// kept beside them.
//
// With -fanout-h2, the edge's points (one process) run once more serving
// TLS, the subscribers on HTTP/2 through net/http's client: many streams
// a connection, up to the edge's most.
//
// With -fanout-replicas N (N > 1), the edge's points run once more on a
// fleet: N edges on the server CPU sharing a redis-server the harness
// starts (on the load CPU, as the fleet rows' Redis), subscriber i on
// replica i mod N. One replica holds the stream's lease and polls, the
// others follow its messages (docs/SCALING.md, Event streams across the
// fleet); the legacy calls are the host's, whoever made them, and CPU
// and RSS are summed over the replicas.
//
// RSS per subscriber is the marginal cost of one more subscriber of a
// stream already open: the first subscriber of each replica connects
// alone, and once its stream runs (the hub, its poller or follower, the
// buffers of a first poll, the runtime's growth for them) the RSS taken
// then is the baseline; the others' growth over it is divided by their
// number. Dividing the whole growth by the subscribers would charge the
// stream's fixed cost to each, most of the figure at 1,000; that fixed
// cost is reported apart (stream RSS).

// fanoutBookEvery is how often the live host changes one token's book.
const fanoutBookEvery = 300 * time.Millisecond

// fanoutPoll is the publisher's poll interval: the edge's default
// streams.routes.orderbook_events.poll, so both read the host alike.
const fanoutPoll = time.Second

// fanoutSettle is how long the streams run, every one open, before the
// window.
const fanoutSettle = 2 * time.Second

// fanoutDialers bounds the subscribers connecting at once; fanoutTries
// is how often one tries.
const (
	fanoutDialers = 64
	fanoutTries   = 3
)

//go:embed nchan.conf.tmpl
var nchanConfTemplate string

// fanoutPoint is one measured point.
type fanoutPoint struct {
	Server string `json:"server"`
	// Replicas is how many edges share the subscribers (1: one process,
	// or a peer).
	Replicas int `json:"replicas"`
	// Proto is the subscribers' HTTP: "h1" (plain HTTP/1.1, a connection
	// each) or "h2" (HTTP/2 over TLS, many streams a connection).
	Proto       string  `json:"proto"`
	Subscribers int     `json:"subscribers"`
	Connected   int     `json:"connected"`
	WindowS     float64 `json:"window_seconds"`
	Events      int64   `json:"events_delivered"`
	// LegacyCalls are the host's order book events calls in the window;
	// LegacyPerSec the same per second.
	LegacyCalls  int64   `json:"legacy_calls"`
	LegacyPerSec float64 `json:"legacy_calls_per_second"`
	// CPUSeconds is the server's process-group CPU time in the window;
	// CPUPerEventUs that over Events, in microseconds.
	CPUSeconds    float64 `json:"cpu_seconds"`
	CPUPerEventUs float64 `json:"cpu_per_event_us"`
	// RSSBefore is the server's RSS before any subscriber connected,
	// RSSOpen once the first subscriber of each replica had its stream
	// running, RSSAfter at the window's end (each summed over the
	// replicas). RSSPerSubscriber is RSSAfter-RSSOpen over the
	// subscribers that connected after the first ones, in bytes (-1 when
	// there were none); RSSStream is RSSOpen-RSSBefore, the open stream's
	// fixed cost with its first subscribers, over the replicas.
	RSSBefore        int64   `json:"rss_before_bytes"`
	RSSOpen          int64   `json:"rss_open_bytes"`
	RSSAfter         int64   `json:"rss_after_bytes"`
	RSSPerSubscriber float64 `json:"rss_per_subscriber_bytes"`
	RSSStream        int64   `json:"rss_stream_bytes"`
	// Arrival is what an event's arrival is in the lag and spread:
	// "socket", the kernel's receive timestamp of the read that brought
	// the event's last bytes (HTTP/1.1 subscribers, arrival.go), or
	// "read", when the subscriber's reader goroutine parsed the event
	// (HTTP/2, whose streams share a connection's reads, or no kernel
	// timestamps). Unstamped counts HTTP/1.1 events that had no kernel
	// timestamp and count at their read.
	Arrival   string  `json:"arrival"`
	Unstamped int64   `json:"unstamped_events"`
	LagP50Ms  float64 `json:"lag_p50_ms"`
	LagP99Ms  float64 `json:"lag_p99_ms"`
	// SpreadP50Ms and SpreadP99Ms are quantiles of an event's arrival
	// after its first arrival at any subscriber: the server's fanout,
	// without the poll's phase, which puts 0 to one poll interval into
	// every lag alike.
	SpreadP50Ms float64 `json:"spread_p50_ms"`
	SpreadP99Ms float64 `json:"spread_p99_ms"`
	// ReadLag and ReadSpread are the same quantiles with the arrival at
	// the reader's parse of the event: the server's fanout and the
	// harness's scheduling of its readers.
	ReadLagP50Ms    float64 `json:"read_lag_p50_ms"`
	ReadLagP99Ms    float64 `json:"read_lag_p99_ms"`
	ReadSpreadP50Ms float64 `json:"read_spread_p50_ms"`
	ReadSpreadP99Ms float64 `json:"read_spread_p99_ms"`
	// Repeated counts events a subscriber got twice or out of order
	// (its timestamp not after the one before); Silent subscribers that
	// got no event in the window. Both must be 0.
	Repeated int64 `json:"repeated"`
	Silent   int   `json:"silent"`
	// PollsPerSec is the edge's own count of its poller's reads
	// (tradergate_stream_polls_total) over the window; -1 for a peer.
	// LoadAvg is the machine's one-minute load average at the window's
	// end: other work on a shared machine shows here.
	PollsPerSec float64 `json:"polls_per_second"`
	LoadAvg     float64 `json:"load_average"`
	Error       string  `json:"error,omitempty"`
	// Note says what the figures hold beyond the columns' text (events
	// without a kernel timestamp).
	Note string `json:"note,omitempty"`
}

// fanoutRecorder is what the subscribers of one point report to.
type fanoutRecorder struct {
	measuring atomic.Bool
	events    atomic.Int64
	repeated  atomic.Int64
	// unstamped counts the window's events whose connection's read had
	// no kernel receive timestamp; stampErr is the first reason.
	unstamped atomic.Int64
	stampErr  atomic.Value
}

// sseSubscriber reads one event stream.
type sseSubscriber struct {
	conn net.Conn  // HTTP/1.1: its own connection
	body io.Closer // HTTP/2: its stream's body, on a shared connection
	// clock tells when the bytes of the connection's last read arrived
	// (HTTP/1.1); nil: an event arrives when the reader parses it.
	clock  arrivalClock
	rec    *fanoutRecorder
	inWin  int64 // events received in the window
	lastTS int64
	// lags are the window's events' lags to their arrival, readLags to
	// their parse, in milliseconds; lagTS their timestamps.
	lags     []int32
	readLags []int32
	lagTS    []int64
	// stamps are the timestamps of the window's events, in the order
	// they came (kept for the tests when keep is set).
	keep   bool
	stamps []int64
}

// dialSubscriber opens a stream at addr, path, with the headers, and
// returns once the answer's head arrived with status 200.
func dialSubscriber(ctx context.Context, addr, path string, header map[string]string, rec *fanoutRecorder) (*sseSubscriber, *bufio.Reader, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	// Every read, the head's too, through the stamping connection: the
	// kernel stamps the segments that come once it is on.
	conn, serr := stampArrivals(nc)
	if serr != nil {
		rec.stampErr.CompareAndSwap(nil, serr.Error())
	}
	var req strings.Builder
	req.WriteString("GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nAccept: text/event-stream\r\n")
	for k, v := range header {
		req.WriteString(k + ": " + v + "\r\n")
	}
	req.WriteString("\r\n")
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, req.String()); err != nil {
		conn.Close()
		return nil, nil, err
	}
	br := bufio.NewReaderSize(conn, 2048)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		conn.Close()
		return nil, nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	_ = conn.SetDeadline(time.Time{})
	// The body, unchunked if it is chunked: http.ReadResponse reads it
	// from br.
	return &sseSubscriber{conn: conn, clock: conn, rec: rec}, bufio.NewReaderSize(resp.Body, 2048), nil
}

// read follows the stream until it ends: for each event (an empty line
// after data), the timestamp of its data. Its arrival is that of the
// connection's last read when the empty line is parsed: the readers
// between the connection and r (http's, and r) read the connection only
// when they hold no complete line, so that read brought the line.
func (s *sseSubscriber) read(r *bufio.Reader) {
	var ts int64
	have := false
	for {
		line, err := r.ReadSlice('\n')
		full := errors.Is(err, bufio.ErrBufferFull)
		if err != nil && !full {
			return
		}
		switch {
		case bytes.HasPrefix(line, []byte("data:")):
			// A long data line's fields of interest come first.
			ts = jsonInt(line, `"timestamp":`)
			have = ts > 0
		case !full && len(bytes.TrimRight(line, "\r\n")) == 0 && have:
			have = false
			s.event(ts)
		}
		for full { // the rest of a long line
			_, err = r.ReadSlice('\n')
			if full = errors.Is(err, bufio.ErrBufferFull); err != nil && !full {
				return
			}
		}
	}
}

// close ends the stream.
func (s *sseSubscriber) close() {
	if s.body != nil {
		s.body.Close()
		return
	}
	s.conn.Close()
}

// h2Transport speaks HTTP/2 only, over TLS with tc: net/http's, which
// puts streams on a connection up to the server's most and then opens
// another.
func h2Transport(tc *tls.Config) *http.Transport {
	var p http.Protocols
	p.SetHTTP2(true)
	return &http.Transport{TLSClientConfig: tc, Protocols: &p, DisableCompression: true, MaxIdleConnsPerHost: 1024}
}

// dialH2Subscriber opens a stream at url over HTTP/2 with client, whose
// transport puts many streams on a connection.
func dialH2Subscriber(ctx context.Context, client *http.Client, url string, header map[string]string, rec *fanoutRecorder) (*sseSubscriber, *bufio.Reader, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		resp.Body.Close()
		return nil, nil, fmt.Errorf("status %d over %s: %s", resp.StatusCode, resp.Proto, b)
	}
	return &sseSubscriber{body: resp.Body, rec: rec}, bufio.NewReaderSize(resp.Body, 2048), nil
}

func (s *sseSubscriber) event(ts int64) {
	if ts <= s.lastTS {
		s.rec.repeated.Add(1)
	}
	s.lastTS = max(s.lastTS, ts)
	if !s.rec.measuring.Load() {
		return
	}
	s.inWin++
	s.rec.events.Add(1)
	// The lag runs from the event's timestamp: the simulated host makes
	// an event visible once its clock reaches that time (legacysim's
	// live mode), and stamps its indexedTimestamp later still.
	read := time.Now().UnixMilli()
	at := read
	if s.clock != nil {
		ns, kernel := s.clock.arrival()
		at = ns / 1e6
		if !kernel {
			s.rec.unstamped.Add(1)
		}
	}
	s.lags = append(s.lags, int32(max(0, at-ts)))
	s.readLags = append(s.readLags, int32(max(0, read-ts)))
	s.lagTS = append(s.lagTS, ts)
	if s.keep {
		s.stamps = append(s.stamps, ts)
	}
}

// jsonInt is the integer after key in line, or 0.
func jsonInt(line []byte, key string) int64 {
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return 0
	}
	var n int64
	for _, c := range line[i+len(key):] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// fanoutTarget is a server of the fanout rows once it listens: one, or
// the fleet's replicas.
type fanoutTarget struct {
	name string
	// h2: the subscribers use HTTP/2 over TLS, through client.
	h2     bool
	client *http.Client
	srvs   []*server
	path   string
	header map[string]string
	stop   func()
}

// jiffies is the CPU time of the target's processes, summed.
func (t *fanoutTarget) jiffies() (uint64, error) {
	var sum uint64
	for _, s := range t.srvs {
		u, err := cpustat.GroupUsage(s.proc.pid())
		if err != nil {
			return 0, err
		}
		sum += u.Jiffies
	}
	return sum, nil
}

// rss is the target's processes' RSS, summed; 0 when one is unknown.
func (t *fanoutTarget) rss() int64 {
	var sum int64
	for _, s := range t.srvs {
		m, err := cpustat.GroupMemory(s.proc.pid())
		if err != nil {
			return 0
		}
		sum += int64(m.RSS)
	}
	return sum
}

// fanoutSubscribers reads -fanout.
func fanoutSubscribers(list string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-fanout %q: want subscriber counts, each at least 1", list)
		}
		out = append(out, n)
	}
	return out, nil
}

// runFanout runs the fanout rows and prints and writes their table.
func (b *bench) runFanout(ctx context.Context, stdout io.Writer) error {
	counts, err := fanoutSubscribers(b.opt.fanout)
	if err != nil {
		return err
	}
	path := filepath.Join(b.tmp, "fanout-fixtures.json")
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	sim, err := b.serve(ctx, "fanout-legacysim", b.opt.loadCPU, addr, 15*time.Second, b.bins.simserver,
		"-listen", addr, "-seed", "1", "-key", b.simKey, "-fixtures", path, "-live-book-every", fanoutBookEvery.String())
	if err != nil {
		return fmt.Errorf("live legacysim: %w", err)
	}
	defer sim.stop()
	var fx fixture.Fixtures
	if err := fixture.ReadJSON(path, &fx); err != nil || len(fx.Tokens) == 0 {
		return fmt.Errorf("live legacysim fixtures: %v", err)
	}
	token := fx.Tokens[0]
	servers := []string{"tradergate", "nchan"}
	if len(b.opt.servers) > 0 {
		servers = servers[:0]
		for _, k := range b.opt.servers {
			if k == kindTradergate || k == kindNchan {
				servers = append(servers, string(k))
			}
		}
	}
	type series struct {
		name     string
		replicas int
		h2       bool
	}
	var runs []series
	for _, name := range servers {
		runs = append(runs, series{name, 1, false})
		if name == string(kindTradergate) && b.opt.fanoutReplicas > 1 {
			runs = append(runs, series{name, b.opt.fanoutReplicas, false})
		}
		if name == string(kindTradergate) && b.opt.fanoutH2 {
			runs = append(runs, series{name, 1, true})
		}
	}
	nchanMod := nchanModule()
	var points []fanoutPoint
	for _, run := range runs {
		name := run.name
		if name == "nchan" && (b.nginx == "" || nchanMod == "") {
			b.note("fanout: no Nchan row: nginx or its nchan module (Debian: libnginx-mod-nchan) is not installed")
			continue
		}
		if run.replicas > 1 && b.redisSrv == nil {
			if b.redis == "" {
				b.note("fanout: no fleet rows: redis-server is not installed")
				continue
			}
			if b.redisSrv, err = b.startRedis(ctx); err != nil {
				b.note("fanout: no fleet rows: redis-server: " + err.Error())
				continue
			}
		}
		for _, n := range counts {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintf(b.stderr, "fanout: %s, %d replicas, h2 %v, %d subscribers…\n", name, run.replicas, run.h2, n)
			p := b.fanoutPoint(ctx, name, run.replicas, run.h2, n, sim, token, nchanMod)
			if ctx.Err() != nil {
				break // an interrupted point measured nothing
			}
			points = append(points, p)
			fmt.Fprintln(b.stderr, "  "+fanoutLine(p))
		}
	}
	var md bytes.Buffer
	writeFanoutTable(&md, points, b.opt.fanoutWindow)
	fmt.Fprint(stdout, "\n"+md.String())
	js, _ := json.MarshalIndent(points, "", "  ")
	_ = os.WriteFile(filepath.Join(b.out, "results-fanout.json"), js, 0o644)
	return os.WriteFile(filepath.Join(b.out, "results-fanout.md"), md.Bytes(), 0o644)
}

// fanoutPoint measures one server (or a fleet of replicas) with n
// subscribers.
func (b *bench) fanoutPoint(ctx context.Context, name string, replicas int, h2 bool, n int, sim *server, token, nchanMod string) (p fanoutPoint) {
	p = fanoutPoint{Server: name, Replicas: replicas, Proto: "h1", Subscribers: n}
	if h2 {
		p.Proto = "h2"
	}
	var t *fanoutTarget
	var err error
	switch {
	case name == "nchan":
		t, err = b.startNchan(ctx, n, sim, token, nchanMod)
	case replicas > 1:
		t, err = b.startFanoutFleet(ctx, replicas, n, sim, token)
	default:
		t, err = b.startFanoutEdge(ctx, n, sim, token, h2)
	}
	if err != nil {
		p.Error = err.Error()
		return p
	}
	defer t.stop()
	time.Sleep(500 * time.Millisecond)
	p.RSSBefore = t.rss()

	rec := &fanoutRecorder{}
	subs := make([]*sseSubscriber, n)
	var wg sync.WaitGroup
	var readers sync.WaitGroup
	var firstErr atomic.Value
	next := atomic.Int64{}
	dial := func(end int) {
		for {
			i := int(next.Add(1)) - 1
			if i >= end || ctx.Err() != nil {
				next.Add(-1) // left for the next call
				return
			}
			// A burst of connections can overflow the server's accept
			// queue (a reset): a subscriber tries again, as an
			// EventSource would.
			addr := t.srvs[i%len(t.srvs)].addr
			var s *sseSubscriber
			var r *bufio.Reader
			var err error
			for try := range fanoutTries {
				if t.h2 {
					s, r, err = dialH2Subscriber(ctx, t.client, "https://"+addr+t.path, t.header, rec)
				} else {
					s, r, err = dialSubscriber(ctx, addr, t.path, t.header, rec)
				}
				if err == nil || ctx.Err() != nil {
					break
				}
				time.Sleep(time.Duration(try+1) * 100 * time.Millisecond)
			}
			if err != nil {
				firstErr.CompareAndSwap(nil, err.Error())
				continue
			}
			subs[i] = s
			readers.Go(func() { s.read(r) })
		}
	}
	// The first subscriber of each replica opens its stream alone; the
	// RSS once the streams run is the baseline of the marginal figure.
	first := min(len(t.srvs), n)
	dial(first)
	time.Sleep(fanoutSettle)
	p.RSSOpen = t.rss()
	for range min(fanoutDialers, n-first) {
		wg.Go(func() { dial(n) })
	}
	wg.Wait()
	defer func() {
		for _, s := range subs {
			if s != nil {
				s.close()
			}
		}
		readers.Wait()
		if t.client != nil {
			t.client.CloseIdleConnections()
		}
	}()
	for _, s := range subs {
		if s != nil {
			p.Connected++
		}
	}
	if e, _ := firstErr.Load().(string); e != "" {
		p.Error = fmt.Sprintf("%d of %d subscribers failed to connect (%d tries each), first: %s", n-p.Connected, n, fanoutTries, e)
	}
	if p.Connected == 0 {
		return p
	}
	time.Sleep(fanoutSettle)

	polls0 := b.edgePolls(t.srvs)
	calls0, err1 := b.simCalls(sim)
	cpu0, err2 := t.jiffies()
	start := time.Now()
	rec.measuring.Store(true)
	select {
	case <-ctx.Done():
		return p
	case <-time.After(b.opt.fanoutWindow):
	}
	rec.measuring.Store(false)
	span := time.Since(start)
	calls1, err3 := b.simCalls(sim)
	cpu1, err4 := t.jiffies()
	p.PollsPerSec = -1
	if polls1 := b.edgePolls(t.srvs); polls0 >= 0 && polls1 >= 0 {
		p.PollsPerSec = (polls1 - polls0) / span.Seconds()
	}
	p.LoadAvg = loadAverage()
	p.RSSAfter = t.rss()
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		p.Error = strings.TrimPrefix(p.Error+"; "+err.Error(), "; ")
	}
	p.WindowS = span.Seconds()
	p.Events = rec.events.Load()
	p.Repeated = rec.repeated.Load()
	p.LegacyCalls = calls1 - calls0
	p.LegacyPerSec = float64(p.LegacyCalls) / p.WindowS
	p.CPUSeconds = float64(cpu1-cpu0) / float64(b.hz)
	if p.Events > 0 {
		p.CPUPerEventUs = p.CPUSeconds / float64(p.Events) * 1e6
	}
	p.RSSPerSubscriber, p.RSSStream = -1, p.RSSOpen-p.RSSBefore
	if later := p.Connected - first; later > 0 && p.RSSAfter > 0 && p.RSSOpen > 0 {
		p.RSSPerSubscriber = float64(p.RSSAfter-p.RSSOpen) / float64(later)
	}
	for _, s := range subs {
		if s != nil && s.inWin == 0 {
			p.Silent++
		}
	}
	p.LagP50Ms, p.LagP99Ms, p.SpreadP50Ms, p.SpreadP99Ms = lagQuantiles(subs, func(s *sseSubscriber) []int32 { return s.lags })
	p.ReadLagP50Ms, p.ReadLagP99Ms, p.ReadSpreadP50Ms, p.ReadSpreadP99Ms = lagQuantiles(subs, func(s *sseSubscriber) []int32 { return s.readLags })
	p.Arrival, p.Unstamped = "socket", rec.unstamped.Load()
	switch {
	case h2:
		p.Arrival = "read"
	case p.Unstamped > 0 && p.Unstamped == p.Events:
		p.Arrival = "read"
		p.Note = "no kernel receive timestamps: the lag and spread are at the reader's parse"
	case p.Unstamped > 0:
		p.Note = fmt.Sprintf("%d of %d events had no kernel receive timestamp and count at the reader's parse", p.Unstamped, p.Events)
	}
	if e, _ := rec.stampErr.Load().(string); e != "" && p.Note != "" {
		p.Note += " (" + e + ")"
	}
	return p
}

// lagQuantiles are the median and 99th percentile of the subscribers'
// lags (as lags picks them: to the arrival, or to the parse), and of
// their spread: each event's lag over its least lag at any subscriber.
func lagQuantiles(subs []*sseSubscriber, lagsOf func(*sseSubscriber) []int32) (lagP50, lagP99, spreadP50, spreadP99 float64) {
	var lags []int32
	firstLag := map[int64]int32{} // an event's lag at its first arrival
	for _, s := range subs {
		if s == nil {
			continue
		}
		l := lagsOf(s)
		lags = append(lags, l...)
		for i, ts := range s.lagTS {
			if f, ok := firstLag[ts]; !ok || l[i] < f {
				firstLag[ts] = l[i]
			}
		}
	}
	spread := make([]int32, 0, len(lags))
	for _, s := range subs {
		if s == nil {
			continue
		}
		l := lagsOf(s)
		for i, ts := range s.lagTS {
			spread = append(spread, l[i]-firstLag[ts])
		}
	}
	lagP50, lagP99 = quantiles(lags)
	spreadP50, spreadP99 = quantiles(spread)
	return
}

// quantiles are the median and 99th percentile of v (sorted here).
func quantiles(v []int32) (p50, p99 float64) {
	if len(v) == 0 {
		return 0, 0
	}
	slices.Sort(v)
	return float64(v[len(v)/2]), float64(v[min(len(v)-1, len(v)*99/100)])
}

// edgePolls is tradergate_stream_polls_total of the order book stream on
// the edges' admin listeners, summed; -1 when one has none.
func (b *bench) edgePolls(srvs []*server) float64 {
	var sum float64
	for _, s := range srvs {
		v := b.edgePollsOf(s)
		if v < 0 {
			return -1
		}
		sum += v
	}
	return sum
}

func (b *bench) edgePollsOf(srv *server) float64 {
	if srv.admin == "" {
		return -1
	}
	resp, err := b.client.Get("http://" + srv.admin + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	const series = `tradergate_stream_polls_total{route="orderbook_events"} `
	i := bytes.Index(body, []byte(series))
	if i < 0 {
		return -1
	}
	rest := body[i+len(series):]
	if j := bytes.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	v, err := strconv.ParseFloat(string(rest), 64)
	if err != nil {
		return -1
	}
	return v
}

// loadAverage is the one-minute load average, 0 when unknown.
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// simCalls is the live host's count of order book events calls.
func (b *bench) simCalls(sim *server) (int64, error) {
	resp, err := b.client.Get("http://" + sim.addr + "/__stats")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var st struct {
		ByRoute map[string]int64 `json:"by_route"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, err
	}
	return st.ByRoute["orderbook_events"], nil
}

// startFanoutEdge starts tradergate against the live host, with room for
// n streams of the bench key and n connections; with h2, serving TLS, its
// subscribers' client ready: Go's HTTP/2 transport, which opens a
// connection when the others hold the edge's most streams (250).
func (b *bench) startFanoutEdge(ctx context.Context, n int, sim *server, token string, h2 bool) (*fanoutTarget, error) {
	srv, err := b.startTradergate(ctx, tgVariant{upstream: "http://" + sim.addr + "/open-api", streams: n, maxConns: n, tls: h2,
		allCPUs: b.opt.fanoutServerCPUs == 2})
	if err != nil {
		return nil, err
	}
	t := &fanoutTarget{
		name: "tradergate", srvs: []*server{srv}, stop: srv.stop,
		path:   "/v1/orderbook/stream?tokenId=" + url.QueryEscape(token),
		header: map[string]string{"Authorization": "Bearer " + b.clientKey},
	}
	if h2 {
		tc, err := tlsClientConfig(b.cert)
		if err != nil {
			srv.stop()
			return nil, err
		}
		t.h2, t.client = true, &http.Client{Transport: h2Transport(tc)}
	}
	return t, nil
}

// startFanoutFleet starts r edges sharing the run's Redis (emptied
// first: no lease or channel of an earlier point), each with room for n
// streams and connections.
func (b *bench) startFanoutFleet(ctx context.Context, r, n int, sim *server, token string) (*fanoutTarget, error) {
	if err := redisFlush(b.redisSrv.addr); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	t := &fanoutTarget{
		name:   "tradergate",
		path:   "/v1/orderbook/stream?tokenId=" + url.QueryEscape(token),
		header: map[string]string{"Authorization": "Bearer " + b.clientKey},
	}
	t.stop = func() {
		for _, s := range t.srvs {
			s.stop()
		}
	}
	for i := range r {
		srv, err := b.startTradergate(ctx, tgVariant{upstream: "http://" + sim.addr + "/open-api", streams: n, maxConns: n,
			redisAddr: b.redisSrv.addr, replica: i + 1})
		if err != nil {
			t.stop()
			return nil, err
		}
		t.srvs = append(t.srvs, srv)
	}
	return t, nil
}

// nchanModule is the path of nginx's nchan module, "" when not
// installed.
func nchanModule() string {
	for _, p := range []string{"/usr/lib/nginx/modules/ngx_nchan_module.so", "/usr/share/nginx/modules/ngx_nchan_module.so"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// nchanConf fills nchan.conf.tmpl.
type nchanConf struct {
	Module, Prefix, Listen string
	Connections, Files     int
}

// nchanConfFor sizes nginx for n subscribers. nginx takes a connection
// slot for each subscriber, the publisher's connection and the listener,
// and once no more than worker_connections/16 slots are free, each new
// connection first closes up to 32 "reusable" ones (ngx_drain_connections,
// which logs "worker_connections are not enough, reusing connections"):
// the publisher's keep-alive connection idle between its posts, whose next
// POST then reads EOF, and subscribers accepted but whose request has not
// come yet, which read EOF before any answer. So worker_connections keeps
// an eighth above n besides a fixed reserve, and every slot in use stays
// below 15/16 of it. Nchan's subscribers each hold one descriptor (no
// upstream), so the file limit is the slots plus room for the listener,
// the logs and nginx's own pipes.
func nchanConfFor(n int) nchanConf {
	c := nchanConf{Connections: n + n/8 + 256}
	c.Files = c.Connections + 64
	return c
}

// startNchan starts nginx with Nchan for n subscribers, and the harness's
// publisher, which polls the live host as the edge's poller does and
// posts each new event of token to Nchan's publisher endpoint.
func (b *bench) startNchan(ctx context.Context, n int, sim *server, token, module string) (*fanoutTarget, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	prefix, err := os.MkdirTemp(b.tmp, "nchan-")
	if err != nil {
		return nil, err
	}
	var srv *server // the directory is its once it starts (ownScratch)
	defer ownScratch(&srv, prefix)
	_ = os.Chmod(prefix, 0o755)
	c := nchanConfFor(n)
	c.Module, c.Prefix, c.Listen = module, prefix, addr
	var conf bytes.Buffer
	if err := template.Must(template.New("nchan").Parse(nchanConfTemplate)).Execute(&conf, c); err != nil {
		return nil, err
	}
	confPath := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(confPath, conf.Bytes(), 0o644); err != nil {
		return nil, err
	}
	_ = os.WriteFile(filepath.Join(b.out, "nchan.conf"), conf.Bytes(), 0o644)
	srv, err = b.serve(ctx, "nchan", b.opt.serverCPU, addr, 10*time.Second, b.nginx, "-p", prefix, "-c", confPath, "-e", "stderr")
	if err != nil {
		return nil, err
	}
	srv.scratch = prefix // now: the stop below, if the publisher fails, removes it
	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	pub := &publisher{
		client: &http.Client{Timeout: 10 * time.Second},
		events: "http://" + sim.addr + "/open-api/v1/orderbook/events?tokenId=" + url.QueryEscape(token),
		key:    b.simKey, post: "http://" + addr + "/pub",
	}
	if err := pub.start(pctx); err != nil {
		cancel()
		srv.stop()
		return nil, fmt.Errorf("nchan publisher: %w", err)
	}
	wg.Go(func() {
		if err := pub.run(pctx); err != nil && pctx.Err() == nil {
			b.note("fanout: the Nchan publisher stopped: " + err.Error())
		}
	})
	return &fanoutTarget{
		name: "nchan", srvs: []*server{srv}, path: "/sub",
		stop: func() { cancel(); wg.Wait(); srv.stop() },
	}, nil
}

// publisher follows one token's order book events on the legacy host and
// posts each to Nchan, in order.
type publisher struct {
	client              *http.Client
	events, key, post   string
	cursor              string
	posted, pollsFailed int64
}

// page reads the events after the cursor (or the newest one), order asc.
func (p *publisher) page(ctx context.Context, q string) ([]json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.events+q, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+p.key)
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("events: status %d", resp.StatusCode)
	}
	var page struct {
		Data struct {
			Items []json.RawMessage `json:"items"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return nil, err
	}
	return page.Data.Items, nil
}

func cursorOf(item json.RawMessage) string {
	var v struct {
		Cursor string `json:"cursor"`
	}
	_ = json.Unmarshal(item, &v)
	return v.Cursor
}

// start finds the newest event: the stream starts after it, as the
// edge's does for a client that gives no cursor.
func (p *publisher) start(ctx context.Context) error {
	items, err := p.page(ctx, "&order=desc&limit=1")
	if err != nil {
		return err
	}
	if len(items) == 0 {
		return errors.New("the token has no events")
	}
	p.cursor = cursorOf(items[0])
	return nil
}

// run polls every fanoutPoll and posts what is new, until ctx ends.
func (p *publisher) run(ctx context.Context) error {
	t := time.NewTicker(fanoutPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		items, err := p.page(ctx, "&order=asc&limit=100&cursor="+url.QueryEscape(p.cursor))
		if err != nil {
			p.pollsFailed++
			continue
		}
		for _, it := range items {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.post, bytes.NewReader(it))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := p.client.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode >= 300 {
				return fmt.Errorf("publish: status %d", resp.StatusCode)
			}
			p.cursor = cursorOf(it)
			p.posted++
		}
	}
}

// fanoutLine is one point as a progress line.
func fanoutLine(p fanoutPoint) string {
	if p.Connected == 0 {
		return "failed: " + p.Error
	}
	s := fmt.Sprintf("%d connected, %d events, %.2f legacy calls/s, %.2f polls/s, load %.1f, %.1f µs CPU/event, %s RSS/subscriber (stream %s), arrival at the %s: lag p50 %.0f ms p99 %.0f ms, spread p50 %.0f ms p99 %.0f ms; at the read: lag p50 %.0f ms p99 %.0f ms, spread p50 %.0f ms p99 %.0f ms; repeated %d, silent %d",
		p.Connected, p.Events, p.LegacyPerSec, p.PollsPerSec, p.LoadAvg, p.CPUPerEventUs, fmtPerSub(p.RSSPerSubscriber), fmtStreamMiB(p.RSSStream),
		p.Arrival, p.LagP50Ms, p.LagP99Ms, p.SpreadP50Ms, p.SpreadP99Ms, p.ReadLagP50Ms, p.ReadLagP99Ms, p.ReadSpreadP50Ms, p.ReadSpreadP99Ms, p.Repeated, p.Silent)
	if p.Error != "" {
		s += " (" + p.Error + ")"
	}
	if p.Note != "" {
		s += " (" + p.Note + ")"
	}
	return s
}

// fmtPerSub is an RSS per subscriber, in KiB; – when unmeasured.
func fmtPerSub(b float64) string {
	if b < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f KiB", b/1024)
}

// fmtStreamMiB is an open stream's RSS in MiB, to a tenth.
func fmtStreamMiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// seriesName is a point's server as the table names it.
func (p fanoutPoint) seriesName() string {
	switch {
	case p.Replicas > 1:
		return fmt.Sprintf("%s ×%d (Redis)", p.Server, p.Replicas)
	case p.Proto == "h2":
		return p.Server + " (HTTP/2, TLS)"
	}
	return p.Server
}

// writeFanoutTable writes the points as a Markdown table.
func writeFanoutTable(w io.Writer, points []fanoutPoint, window time.Duration) {
	fmt.Fprintf(w, "Fanout: one order book stream, N subscribers over plain HTTP/1.1 (or HTTP/2 over TLS, many streams a connection, where named), live legacy host (a book change per token about every %v), %v window. "+
		"A fleet (×N) spreads the subscribers evenly over N edges sharing one Redis; its CPU and RSS are the replicas' sums. "+
		"RSS/subscriber is the marginal cost: growth over the RSS with the stream already open to one subscriber per replica, over the other subscribers; "+
		"stream RSS is that open stream's own growth. "+
		"Lag runs from the event's timestamp to its arrival at a subscriber, spread is an event's arrival after its first arrival at any subscriber: the fanout's share of the lag, without the poll's phase. "+
		"The arrival column says what arrival is: socket, when the event's bytes reached the subscriber's socket (the kernel's receive timestamp of the read that brought them; HTTP/1.1), "+
		"or read, when the harness's reader goroutine parsed the event (HTTP/2, whose streams share a connection's reads). "+
		"Read lag and read spread take the parse everywhere: they add the harness's scheduling of its readers, which share a CPU.\n\n", fanoutBookEvery, window)
	const cols = 21
	fmt.Fprintln(w, "| server | subscribers | connected | events delivered | legacy calls/s | edge polls/s | CPU µs/event | RSS/subscriber | stream RSS | arrival | lag p50 | lag p99 | spread p50 | spread p99 | read lag p50 | read lag p99 | read spread p50 | read spread p99 | repeated | silent | load avg |")
	fmt.Fprintln(w, "|---"+strings.Repeat("|--:", cols-1)+"|")
	for _, p := range points {
		if p.Connected == 0 {
			fmt.Fprintf(w, "| %s | %d | 0 | failed: %s %s\n", p.seriesName(), p.Subscribers, p.Error, strings.Repeat("|", cols-3))
			continue
		}
		polls := "–"
		if p.PollsPerSec >= 0 {
			polls = fmt.Sprintf("%.2f", p.PollsPerSec)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %.2f | %s | %.1f | %s | %s | %s | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %d | %d | %.1f |\n", p.seriesName(), p.Subscribers, p.Connected, p.Events,
			p.LegacyPerSec, polls, p.CPUPerEventUs, fmtPerSub(p.RSSPerSubscriber), fmtStreamMiB(p.RSSStream), p.Arrival, p.LagP50Ms, p.LagP99Ms, p.SpreadP50Ms, p.SpreadP99Ms,
			p.ReadLagP50Ms, p.ReadLagP99Ms, p.ReadSpreadP50Ms, p.ReadSpreadP99Ms, p.Repeated, p.Silent, p.LoadAvg)
	}
	for _, p := range points {
		if p.Error != "" && p.Connected > 0 {
			fmt.Fprintf(w, "\n%s, %d subscribers: %s\n", p.seriesName(), p.Subscribers, p.Error)
		}
		if p.Note != "" && p.Connected > 0 {
			fmt.Fprintf(w, "\n%s, %d subscribers: %s\n", p.seriesName(), p.Subscribers, p.Note)
		}
	}
}
