package main

import (
	"bufio"
	"bytes"
	"context"
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
// time over the events it delivered, its RSS growth over its RSS before
// the subscribers came, per subscriber, and the delivery lag, from an
// event's timestamp (when the simulated host made it visible) to its
// arrival at a subscriber.

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
	Server      string  `json:"server"`
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
	// RSSBefore is the server's RSS before the subscribers connected,
	// RSSAfter at the window's end; RSSPerSubscriber their difference
	// over Connected, in bytes.
	RSSBefore        int64   `json:"rss_before_bytes"`
	RSSAfter         int64   `json:"rss_after_bytes"`
	RSSPerSubscriber float64 `json:"rss_per_subscriber_bytes"`
	LagP50Ms         float64 `json:"lag_p50_ms"`
	LagP99Ms         float64 `json:"lag_p99_ms"`
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
}

// fanoutRecorder is what the subscribers of one point report to.
type fanoutRecorder struct {
	measuring atomic.Bool
	events    atomic.Int64
	repeated  atomic.Int64
}

// sseSubscriber reads one event stream.
type sseSubscriber struct {
	conn   net.Conn
	rec    *fanoutRecorder
	inWin  int64 // events received in the window
	lastTS int64
	lags   []int32
	// stamps are the timestamps of the window's events, in the order
	// they came (kept for the tests when keep is set).
	keep   bool
	stamps []int64
}

// dialSubscriber opens a stream at addr, path, with the headers, and
// returns once the answer's head arrived with status 200.
func dialSubscriber(ctx context.Context, addr, path string, header map[string]string, rec *fanoutRecorder) (*sseSubscriber, *bufio.Reader, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
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
	return &sseSubscriber{conn: conn, rec: rec}, bufio.NewReaderSize(resp.Body, 2048), nil
}

// read follows the stream until it ends: for each event (an empty line
// after data), the timestamp of its data.
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
	s.lags = append(s.lags, int32(max(0, time.Now().UnixMilli()-ts)))
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

// fanoutTarget is a server of the fanout rows once it listens.
type fanoutTarget struct {
	name   string
	srv    *server
	path   string
	header map[string]string
	stop   func()
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
	nchanMod := nchanModule()
	var points []fanoutPoint
	for _, name := range servers {
		if name == "nchan" && (b.nginx == "" || nchanMod == "") {
			b.note("fanout: no Nchan row: nginx or its nchan module (Debian: libnginx-mod-nchan) is not installed")
			continue
		}
		for _, n := range counts {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintf(b.stderr, "fanout: %s, %d subscribers…\n", name, n)
			p := b.fanoutPoint(ctx, name, n, sim, token, nchanMod)
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

// fanoutPoint measures one server with n subscribers.
func (b *bench) fanoutPoint(ctx context.Context, name string, n int, sim *server, token, nchanMod string) (p fanoutPoint) {
	p = fanoutPoint{Server: name, Subscribers: n}
	var t *fanoutTarget
	var err error
	if name == "nchan" {
		t, err = b.startNchan(ctx, n, sim, token, nchanMod)
	} else {
		t, err = b.startFanoutEdge(ctx, n, sim, token)
	}
	if err != nil {
		p.Error = err.Error()
		return p
	}
	defer t.stop()
	pgid := t.srv.proc.pid()
	time.Sleep(500 * time.Millisecond)
	if m, err := cpustat.GroupMemory(pgid); err == nil {
		p.RSSBefore = int64(m.RSS)
	}

	rec := &fanoutRecorder{}
	subs := make([]*sseSubscriber, n)
	var wg sync.WaitGroup
	var readers sync.WaitGroup
	var firstErr atomic.Value
	next := atomic.Int64{}
	for range min(fanoutDialers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				// A burst of connections can overflow the server's accept
				// queue (a reset): a subscriber tries again, as an
				// EventSource would.
				var s *sseSubscriber
				var r *bufio.Reader
				var err error
				for try := range fanoutTries {
					if s, r, err = dialSubscriber(ctx, t.srv.addr, t.path, t.header, rec); err == nil || ctx.Err() != nil {
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
		})
	}
	wg.Wait()
	defer func() {
		for _, s := range subs {
			if s != nil {
				s.conn.Close()
			}
		}
		readers.Wait()
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

	polls0 := b.edgePolls(t.srv)
	calls0, err1 := b.simCalls(sim)
	cpu0, err2 := cpustat.GroupJiffies(pgid)
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
	cpu1, err4 := cpustat.GroupJiffies(pgid)
	p.PollsPerSec = -1
	if polls1 := b.edgePolls(t.srv); polls0 >= 0 && polls1 >= 0 {
		p.PollsPerSec = (polls1 - polls0) / span.Seconds()
	}
	p.LoadAvg = loadAverage()
	if m, err := cpustat.GroupMemory(pgid); err == nil {
		p.RSSAfter = int64(m.RSS)
	}
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
	p.RSSPerSubscriber = float64(p.RSSAfter-p.RSSBefore) / float64(p.Connected)
	var lags []int32
	for _, s := range subs {
		if s == nil {
			continue
		}
		if s.inWin == 0 {
			p.Silent++
		}
		lags = append(lags, s.lags...)
	}
	slices.Sort(lags)
	if len(lags) > 0 {
		p.LagP50Ms = float64(lags[len(lags)/2])
		p.LagP99Ms = float64(lags[min(len(lags)-1, len(lags)*99/100)])
	}
	return p
}

// edgePolls is tradergate_stream_polls_total of the order book stream on
// the edge's admin listener, -1 when there is none.
func (b *bench) edgePolls(srv *server) float64 {
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
// n streams of the bench key and n connections.
func (b *bench) startFanoutEdge(ctx context.Context, n int, sim *server, token string) (*fanoutTarget, error) {
	srv, err := b.startTradergate(ctx, tgVariant{upstream: "http://" + sim.addr + "/open-api", streams: n, maxConns: n})
	if err != nil {
		return nil, err
	}
	return &fanoutTarget{
		name: "tradergate", srv: srv, stop: srv.stop,
		path:   "/v1/orderbook/stream?tokenId=" + url.QueryEscape(token),
		header: map[string]string{"Authorization": "Bearer " + b.clientKey},
	}, nil
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
	_ = os.Chmod(prefix, 0o755)
	c := nchanConf{Module: module, Prefix: prefix, Listen: addr, Connections: n + 256}
	c.Files = 2*c.Connections + 64
	var conf bytes.Buffer
	if err := template.Must(template.New("nchan").Parse(nchanConfTemplate)).Execute(&conf, c); err != nil {
		return nil, err
	}
	confPath := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(confPath, conf.Bytes(), 0o644); err != nil {
		return nil, err
	}
	_ = os.WriteFile(filepath.Join(b.out, "nchan.conf"), conf.Bytes(), 0o644)
	srv, err := b.serve(ctx, "nchan", b.opt.serverCPU, addr, 10*time.Second, b.nginx, "-p", prefix, "-c", confPath, "-e", "stderr")
	if err != nil {
		return nil, err
	}
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
		name: "nchan", srv: srv, path: "/sub",
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
	s := fmt.Sprintf("%d connected, %d events, %.2f legacy calls/s, %.2f polls/s, load %.1f, %.1f µs CPU/event, %s RSS/subscriber, lag p50 %.0f ms p99 %.0f ms, repeated %d, silent %d",
		p.Connected, p.Events, p.LegacyPerSec, p.PollsPerSec, p.LoadAvg, p.CPUPerEventUs, fmtPerSub(p.RSSPerSubscriber), p.LagP50Ms, p.LagP99Ms, p.Repeated, p.Silent)
	if p.Error != "" {
		s += " (" + p.Error + ")"
	}
	return s
}

// fmtPerSub is an RSS per subscriber, in KiB.
func fmtPerSub(b float64) string { return fmt.Sprintf("%.1f KiB", b/1024) }

// writeFanoutTable writes the points as a Markdown table.
func writeFanoutTable(w io.Writer, points []fanoutPoint, window time.Duration) {
	fmt.Fprintf(w, "Fanout: one order book stream, N subscribers over plain HTTP/1.1, live legacy host (a book change per token about every %v), %v window\n\n", fanoutBookEvery, window)
	fmt.Fprintln(w, "| server | subscribers | connected | events delivered | legacy calls/s | edge polls/s | CPU µs/event | RSS/subscriber | lag p50 | lag p99 | repeated | silent | load avg |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, p := range points {
		if p.Connected == 0 {
			fmt.Fprintf(w, "| %s | %d | 0 | failed: %s |||||||||\n", p.Server, p.Subscribers, p.Error)
			continue
		}
		polls := "–"
		if p.PollsPerSec >= 0 {
			polls = fmt.Sprintf("%.2f", p.PollsPerSec)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %.2f | %s | %.1f | %s | %.0f ms | %.0f ms | %d | %d | %.1f |\n", p.Server, p.Subscribers, p.Connected, p.Events,
			p.LegacyPerSec, polls, p.CPUPerEventUs, fmtPerSub(p.RSSPerSubscriber), p.LagP50Ms, p.LagP99Ms, p.Repeated, p.Silent, p.LoadAvg)
	}
	for _, p := range points {
		if p.Error != "" && p.Connected > 0 {
			fmt.Fprintf(w, "\n%s, %d subscribers: %s\n", p.Server, p.Subscribers, p.Error)
		}
	}
}
