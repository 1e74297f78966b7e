package legacysim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"tradergate/internal/testkit"
)

func TestFailStatus(t *testing.T) {
	s, srv := fixed(t, Config{})
	tx := "/open-api/v1/tx/" + s.TradeTxs()[0]
	open := "/open-api/v1/trader/" + s.Wallets()[0] + "/positions/open"

	s.SetFaults(Faults{FailStatus: 503})
	get(t, srv, tx, nil).fail(t, 503, "Service unavailable")
	get(t, srv, "/nowhere", nil).fail(t, 503, "Service unavailable")

	s.SetFaults(Faults{FailStatus: 429, RetryAfter: 7})
	r := get(t, srv, tx, nil)
	r.fail(t, 429, "Too many requests. Please slow down.")
	if r.header.Get("Retry-After") != "7" {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	s.SetFaults(Faults{FailStatus: 500})
	r = get(t, srv, tx, nil)
	r.fail(t, 500, "Internal server error")
	if r.header.Get("Retry-After") != "" {
		t.Fatal("Retry-After without RetryAfter")
	}

	// Route scoping: only the named route fails.
	s.SetFaults(Faults{Route: "tx", FailStatus: 502})
	get(t, srv, tx, nil).fail(t, 502, "Bad gateway")
	get(t, srv, open, nil).ok(t)

	s.SetFaults(Faults{})
	get(t, srv, tx, nil).ok(t)
}

// TestFaultsOutOfRange: a switch set to a value it cannot honour never
// panics in a handler. A negative PadBytes pads nothing; a FailStatus that
// no response can carry is refused by SetFaults, which keeps the switches
// in force.
func TestFaultsOutOfRange(t *testing.T) {
	s, srv := fixed(t, Config{})
	path := "/open-api/v1/trader/" + s.Wallets()[0] + "/positions/open"
	normal := get(t, srv, path, nil)
	s.SetFaults(Faults{PadBytes: -10})
	if got := get(t, srv, path, nil); got.status != http.StatusOK || string(got.body) != string(normal.body) {
		t.Fatalf("PadBytes -10: %d %s", got.status, got.body)
	}

	s.SetFaults(Faults{FailStatus: 503})
	for _, status := range []int{-1, 42, 99, 1000} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("SetFaults accepted FailStatus %d", status)
				}
			}()
			s.SetFaults(Faults{FailStatus: status})
		}()
	}
	get(t, srv, path, nil).fail(t, 503, "Service unavailable")
}

func TestFailRateSpread(t *testing.T) {
	s, srv := fixed(t, Config{})
	path := "/open-api/v1/trader/" + s.Wallets()[0] + "/positions/open"
	for _, c := range []struct {
		rate  float64
		fails string // 1-based requests that fail, of 12
	}{
		{0.25, "4 8 12"},
		{0.5, "2 4 6 8 10 12"},
		{1.0 / 3, "3 6 9 12"},
		{0, "1 2 3 4 5 6 7 8 9 10 11 12"},
	} {
		s.SetFaults(Faults{FailStatus: 500, FailRate: c.rate, Route: "positions_open"})
		get(t, srv, "/open-api/v1/tx/"+s.TradeTxs()[0], nil).ok(t) // out of scope: not counted
		var failed []string
		for n := 1; n <= 12; n++ {
			if get(t, srv, path, nil).status == 500 {
				failed = append(failed, itoa(n))
			}
		}
		if got := strings.Join(failed, " "); got != c.fails {
			t.Errorf("rate %v: failed %q, want %q", c.rate, got, c.fails)
		}
	}
}

func TestBodyFaults(t *testing.T) {
	s, srv := fixed(t, Config{})
	path := "/open-api/v1/trader/" + s.Wallets()[0] + "/activity"
	normal := get(t, srv, path, nil)

	s.SetFaults(Faults{PadBytes: 1000})
	padded := get(t, srv, path, nil)
	if len(padded.body) != len(normal.body)+1000 || !json.Valid(padded.body) || string(padded.body[:len(normal.body)]) != string(normal.body) {
		t.Fatalf("padded body of %d bytes, normal %d", len(padded.body), len(normal.body))
	}

	s.SetFaults(Faults{Malformed: true})
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || json.Valid(body) || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("malformed: %d %q", resp.StatusCode, body)
	}
	// Body faults leave failures alone.
	get(t, srv, "/open-api/v1/tx/0x12", nil).fail(t, 400, "Invalid txHash format")

	for _, enc := range []string{"", "identity"} {
		s.SetFaults(Faults{Truncate: true, Route: "activity"})
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if enc != "" {
			req.Header.Set("Accept-Encoding", enc)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("encoding %q: truncated read gave %d, %v", enc, resp.StatusCode, err)
		}
	}
	s.SetFaults(Faults{})
	get(t, srv, path, nil).ok(t)
}

func TestLatencyAndHang(t *testing.T) {
	s, srv := fixed(t, Config{})
	path := srv.URL + "/open-api/v1/trader/" + s.Wallets()[0] + "/positions/open"

	s.SetFaults(Faults{Latency: 150 * time.Millisecond})
	start := time.Now()
	do(t, srv, http.MethodGet, path, nil).ok(t)
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("answered after %v", d)
	}

	// A client that gives up releases the handler, latency or hang.
	for _, f := range []Faults{{Latency: time.Hour}, {Hang: true}, {Hang: true, Route: "positions_open"}} {
		s.SetFaults(f)
		s.ResetStats()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
			resp, err := srv.Client().Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		testkit.Eventually(t, "the request in flight", func() bool { return s.Stats().InFlight == 1 })
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("%+v: client got %v", f, err)
		}
		testkit.Eventually(t, "the handler to return", func() bool { return s.Stats().InFlight == 0 })
	}
}

func TestInFlightCounting(t *testing.T) {
	s, srv := fixed(t, Config{})
	path := srv.URL + "/open-api/v1/tx/" + s.TradeTxs()[0]
	s.SetFaults(Faults{Hang: true})
	s.ResetStats()
	const n = 8
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
			if resp, err := srv.Client().Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	testkit.Eventually(t, "all requests in flight", func() bool { return s.Stats().InFlight == n })
	st := s.Stats()
	if st.MaxInFlight != n || st.Requests != n || st.ByRoute["tx"] != n {
		t.Fatalf("stats %+v", st)
	}
	cancel()
	wg.Wait()
	testkit.Eventually(t, "handlers to return", func() bool { return s.Stats().InFlight == 0 })
	if st := s.Stats(); st.MaxInFlight != n {
		t.Fatalf("high-water mark %d after the requests ended", st.MaxInFlight)
	}
	s.ResetStats()
	if st := s.Stats(); st.MaxInFlight != 0 || st.Requests != 0 {
		t.Fatalf("after ResetStats: %+v", st)
	}

	// Slow, not hung: concurrency still shows in the high-water mark.
	s.SetFaults(Faults{Latency: 300 * time.Millisecond})
	for range n {
		wg.Go(func() {
			if resp, err := srv.Client().Get(path); err == nil {
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if st := s.Stats(); st.MaxInFlight < 2 || st.Requests != n {
		t.Fatalf("slow requests: %+v", st)
	}
}

func TestStatsAndRecent(t *testing.T) {
	s, srv := fixed(t, Config{})
	w := s.Wallets()[0]
	tr := "/open-api/v1/trader/" + w
	paths := map[string]string{
		"orderbook_events":       "/open-api/v1/orderbook/events?tokenId=" + s.Markets()[0].Tokens[0] + "&limit=1",
		"activity":               tr + "/activity",
		"deposits_withdrawals":   tr + "/deposits-withdrawals",
		"combo_positions_closed": tr + "/combo-positions/closed",
		"positions_closed":       tr + "/positions/closed",
		"positions_open":         tr + "/positions/open",
		"tx":                     "/open-api/v1/tx/" + s.TradeTxs()[0],
		"wallet_address":         "/open-api/v1/trader/wallet-address/" + w,
	}
	for route, p := range paths {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+p, nil)
		req.Header.Set("X-Route", route)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get(t, srv, "/unknown", url.Values{"a": {"b"}})
	st := s.Stats()
	if st.Requests != int64(len(paths))+1 || len(st.ByRoute) != len(paths) {
		t.Fatalf("stats %+v", st)
	}
	for route := range paths {
		if st.ByRoute[route] != 1 {
			t.Errorf("route %s counted %d", route, st.ByRoute[route])
		}
	}
	rec := s.Recent()
	if len(rec) != len(paths)+1 {
		t.Fatalf("%d records", len(rec))
	}
	for _, r := range rec[:len(paths)] {
		if r.Header.Get("X-Route") != r.Route || !strings.HasPrefix(paths[r.Route], r.Path) {
			t.Errorf("record %+v", r)
		}
	}
	last := rec[len(rec)-1]
	if last.Route != "" || last.Path != "/unknown" || last.Query.Get("a") != "b" {
		t.Errorf("last record %+v", last)
	}
	// Records are copies.
	last.Query.Set("a", "changed")
	last.Header.Set("X-Changed", "1")
	if again := s.Recent()[len(rec)-1]; again.Query.Get("a") != "b" || again.Header.Get("X-Changed") != "" {
		t.Error("Recent returned shared maps")
	}

	// The ring keeps the last 256, oldest first.
	for i := range 300 {
		get(t, srv, "/open-api/v1/tx/0x12", url.Values{"n": {itoa(i)}})
	}
	rec = s.Recent()
	if len(rec) != 256 || rec[0].Query.Get("n") != "44" || rec[255].Query.Get("n") != "299" {
		t.Fatalf("%d records from %s to %s", len(rec), rec[0].Query.Get("n"), rec[len(rec)-1].Query.Get("n"))
	}
	s.ResetStats()
	if len(s.Recent()) != 0 {
		t.Error("ResetStats kept Recent")
	}
}

// Faults may change while requests are served: each answer is the one of
// a single switch setting (a request reads the switches once), and the
// answer after the switches are cleared is the clean page again.
func TestSetFaultsConcurrently(t *testing.T) {
	s, srv := fixed(t, Config{})
	path := srv.URL + "/open-api/v1/trader/" + s.Wallets()[0] + "/activity?limit=5"
	answer := func() (int, []byte, error) {
		resp, err := srv.Client().Get(path)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	_, clean, err := answer()
	if err != nil || !json.Valid(clean) {
		t.Fatalf("clean answer %s, %v", clean, err)
	}
	var clients, setter sync.WaitGroup
	stop := make(chan struct{})
	setter.Go(func() {
		fs := []Faults{{}, {FailStatus: 500, FailRate: 0.5}, {PadBytes: 10}, {Malformed: true}}
		for i := 0; ; i++ {
			select {
			case <-stop:
				s.SetFaults(Faults{})
				return
			default:
				s.SetFaults(fs[i%len(fs)])
			}
		}
	})
	for range 4 {
		clients.Go(func() {
			for range 50 {
				code, body, err := answer()
				switch {
				case err != nil:
					t.Errorf("no answer: %v", err)
				case code == 500: // FailStatus
				case code != 200:
					t.Errorf("status %d: %s", code, body)
				case !json.Valid(body): // Malformed
				case string(bytes.TrimRight(body, " \t\r\n")) != string(bytes.TrimRight(clean, " \t\r\n")):
					t.Errorf("200 answer is neither the page nor the page padded: %s", body)
				}
			}
		})
	}
	clients.Wait()
	close(stop)
	setter.Wait()
	if code, body, err := answer(); err != nil || code != 200 || string(body) != string(clean) {
		t.Errorf("after clearing the faults: %d %s, %v; want the clean page", code, body, err)
	}
}
