package load

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The schedule spreads a run's requests evenly over its connections and
// computes every due time from the start, so that a long run does not
// drift.
func TestScheduleEvenAndDriftFree(t *testing.T) {
	start := time.Unix(1000, 0)
	s := schedule{start: start, rate: 3000, n: 4}
	// Request j of the run, whichever connection sends it, is due at
	// start + j/3000 s.
	for j := int64(0); j < 40; j++ {
		k, i := int(j%4), j/4
		want := start.Add(time.Duration(j) * time.Second / 3000)
		if got := s.due(k, i); got.Sub(want).Abs() > time.Nanosecond {
			t.Fatalf("request %d (connection %d, #%d) due %v, want %v", j, k, i, got.Sub(start), want.Sub(start))
		}
	}
	// An hour in, at the same rate: still exact to the nanosecond.
	j := int64(3000 * 3600)
	if got := s.due(int(j%4), j/4); got.Sub(start.Add(time.Hour)).Abs() > time.Nanosecond {
		t.Fatalf("an hour's worth of requests due at %v", got.Sub(start))
	}
}

func TestUnsentCountsOnlyTheWindow(t *testing.T) {
	start := time.Unix(0, 0)
	s := schedule{start: start, rate: 1000, n: 2} // each connection: one request every 2ms
	win := window{from: start.Add(10 * time.Millisecond), to: start.Add(20 * time.Millisecond)}
	// Connection 0's requests are due at 0, 2, 4... ms: those at 10..18
	// are in the window, 5 of them; from #3 (6ms) on, all 5 are unsent.
	if n := unsentFrom(s, 0, 3, win); n != 5 {
		t.Fatalf("unsent from #3: %d, want 5", n)
	}
	if n := unsentFrom(s, 1, 7, win); n != 3 { // 15, 17, 19 ms
		t.Fatalf("unsent of connection 1 from #7: %d, want 3", n)
	}
}

// pausingHandler answers at once, except that it stalls every answer for
// pause once every period: what a stop-the-world pause or a scheduling
// delay does to a server.
func pausingHandler(period, pause time.Duration, served *atomic.Int64) http.Handler {
	start := time.Now()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if time.Since(start)%period < pause {
			time.Sleep(pause - time.Since(start)%period)
		}
		w.Header().Set("X-Cache", "HIT")
		_, _ = w.Write([]byte(strings.Repeat("x", 200)))
	})
}

// TestOpenLoopSeesPauses runs a server that stalls 20ms in every 100ms at
// a fixed rate, over HTTP/1.1: the answers due during a stall wait for
// it, so about a fifth of the window's answers are late by up to 20ms,
// and the schedule's rate is what is answered.
func TestOpenLoopSeesPauses(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(pausingHandler(100*time.Millisecond, 20*time.Millisecond, &served))
	t.Cleanup(srv.Close)
	res, err := Run(context.Background(), Spec{
		Addr: strings.TrimPrefix(srv.URL, "http://"), Mode: ModeList, URLs: []string{"/v1/tx"}, Connections: 4,
		Rate: 200, Warmup: 100 * time.Millisecond, Duration: 500 * time.Millisecond, ServerCPU: -1, LoadCPU: -1,
		SampleCache: true, KeepAnswers: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkPaused(t, res, 200)

	// A closed loop keeps its answers too, each due when it was sent, and
	// sees a pause only in the answers in flight when it began.
	res, err = Run(context.Background(), Spec{
		Addr: strings.TrimPrefix(srv.URL, "http://"), Mode: ModeList, URLs: []string{"/v1/tx"}, Connections: 4,
		Warmup: 100 * time.Millisecond, Duration: 300 * time.Millisecond, ServerCPU: -1, LoadCPU: -1, KeepAnswers: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(res.Answers)) != res.Requests || res.Requests == 0 || res.WindowStart.IsZero() {
		t.Fatalf("closed loop: %d answers kept of %d", len(res.Answers), res.Requests)
	}
	for _, a := range res.Answers {
		// A request sent in the warm-up counts when answered in the window.
		if a[0]+a[1] < 0 || a[0] > res.Window.Microseconds() || a[2] != 0 {
			t.Fatalf("closed-loop answer %v outside its window of %v", a, res.Window)
		}
	}
}

// checkPaused checks an open-loop run of pausingHandler(100ms, 20ms) at
// rate: every request of the window answered, the rate kept, and the
// pauses in the tail.
func checkPaused(t *testing.T, res *Result, rate float64) {
	t.Helper()
	want := int64(rate * res.Window.Seconds())
	if res.Errors != 0 || res.Unsent != 0 || res.Requests < want*97/100 || res.Requests > want+1 {
		t.Fatalf("%d requests (want %d), %d errors, %d unsent", res.Requests, want, res.Errors, res.Unsent)
	}
	if res.Rate != rate || res.RPS < rate*0.97 || res.RPS > rate*1.01 {
		t.Fatalf("rate %v, answered %.0f/s", res.Rate, res.RPS)
	}
	// A fifth of the time paused: p50 is a quick answer, p90 one that
	// waited, p99 and max most of a pause. (A closed loop would show
	// about one answer per connection per pause as slow: 4 of 100.)
	l := res.Latency
	// The bounds leave room for a busy machine and the race detector.
	if l.P50 > 15*time.Millisecond || l.P90 < 2*time.Millisecond || l.P99 < 10*time.Millisecond || l.Max < 15*time.Millisecond || l.Max > 250*time.Millisecond {
		t.Fatalf("latencies %+v do not show 20ms pauses every 100ms", l)
	}
	// The pauses are the server's: taking the load generator's own
	// lateness out leaves them in, and takes nothing else.
	s := res.Served
	if s.P99 < 10*time.Millisecond || s.Max < 15*time.Millisecond || s.P99 > l.P99 || s.Max > l.Max {
		t.Fatalf("served %+v against latencies %+v: the pauses should stay in", s, l)
	}
	if int64(len(res.Answers)) != res.Requests {
		t.Fatalf("%d answers kept of %d", len(res.Answers), res.Requests)
	}
	for i, a := range res.Answers {
		if a[0] < 0 || a[0] > res.Window.Microseconds() || (i > 0 && a[0] < res.Answers[i-1][0]) || a[2] < 0 || a[2] > a[1] || a[3] < 0 || a[3] > a[2]+1 {
			t.Fatalf("answer %d due at %dµs: outside the window or out of order", i, a[0])
		}
	}
}

// TestOpenLoopH2 runs the same pausing server over HTTP/2 with TLS, open
// loop and then closed loop.
func TestOpenLoopH2(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewUnstartedServer(pausingHandler(100*time.Millisecond, 20*time.Millisecond, &served))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := Spec{
		Addr: strings.TrimPrefix(srv.URL, "https://"), Mode: ModeList, URLs: []string{"/v1/tx", "/v1/tx?b"}, Connections: 2, Streams: 4,
		Headers: []string{"Authorization: Bearer k", "Host: ignored", "Accept-Encoding: gzip"},
		Rate:    200, Warmup: 100 * time.Millisecond, Duration: 500 * time.Millisecond, ServerCPU: -1, LoadCPU: -1,
		CheckCache: "HIT", SampleEvery: 2, KeepAnswers: true,
		TLS: &TLSSpec{CAFile: ca, ServerName: "example.com", HTTP2: true},
	}
	res, err := Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Protocol != "h2" || res.CacheSampled == 0 || res.CacheUnexpected != 0 || res.BodyBytes != 200*res.Requests {
		t.Fatalf("protocol %q, X-Cache %d sampled, %d unexpected, %d body bytes", res.Protocol, res.CacheSampled, res.CacheUnexpected, res.BodyBytes)
	}
	checkPaused(t, res, 200)

	// Closed loop: as fast as the streams go.
	spec.Rate, spec.KeepAnswers, spec.Duration = 0, false, 300*time.Millisecond
	res, err = Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests < 100 || res.Errors != 0 || res.Status[200] != res.Requests || res.Unsent != 0 {
		t.Fatalf("closed loop: %d requests, %d errors, status %v", res.Requests, res.Errors, res.Status)
	}
}

// TestServedLatency: the load generator's own lateness comes out of an
// answer's latency; the wait for a busy connection stays in.
func TestServedLatency(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct{ latency, late, connWait, want time.Duration }{
		{10 * ms, 0, 0, 10 * ms},           // sent on time
		{10 * ms, 3 * ms, 0, 7 * ms},       // the load generator woke late
		{10 * ms, 3 * ms, 3 * ms, 10 * ms}, // all of it waiting for the connection
		{10 * ms, 5 * ms, 2 * ms, 7 * ms},  // some of each
		{10 * ms, 1 * ms, 2 * ms, 10 * ms}, // the clocks disagree by a little: nothing taken
	} {
		if got := servedLatency(c.latency, c.late, c.connWait); got != c.want {
			t.Errorf("servedLatency(%v, late %v, connWait %v) = %v, want %v", c.latency, c.late, c.connWait, got, c.want)
		}
	}
}

func TestSpecRefusesRateOffList(t *testing.T) {
	for _, s := range []Spec{
		{Addr: "127.0.0.1:1", Mode: ModeZipf, URLs: []string{"/"}, Rate: 10, Duration: time.Second},
		{Addr: "127.0.0.1:1", Mode: ModeList, URLs: []string{"/"}, Rate: -1, Duration: time.Second},
		{Addr: "127.0.0.1:1", Mode: ModeList, URLs: []string{"/"}, Rate: 10, Duration: time.Second, TLS: &TLSSpec{CAFile: "x", NewConnection: true}},
	} {
		s.applyDefaults()
		if err := s.validate(); err == nil || !strings.Contains(err.Error(), "rate:") {
			t.Errorf("%+v: err = %v", s, err)
		}
	}
}
