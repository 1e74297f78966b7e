package load

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"tradergate/bench/cpustat"
)

// idleDialers is how many connections of an idle run are opened at once.
const idleDialers = 32

// runIdle opens Connections TLS connections (HTTP/2 with Spec.TLS.HTTP2,
// else HTTP/1.1), each of which sends one request for URLs[0], reads its
// answer and then sends nothing more; once all are open it waits Duration
// and reads the server's resident memory, which it also read before the
// first one opened. The difference over the connections is what an idle
// connection costs the server. With MetricsURL, Metrics are read at the
// same two moments (a Go server's heap and stacks: where it went). The client keeps no buffer of its own per
// connection once its answer is read, so that the load generator's memory
// stays small beside the server's.
func runIdle(ctx context.Context, s *Spec) (*Result, error) {
	tc, err := clientTLS(s.TLS)
	if err != nil {
		return nil, err
	}
	res := &Result{Status: map[int]int64{}}
	before, err := cpustat.GroupMemory(s.ServerPGID)
	if err != nil {
		return nil, fmt.Errorf("server memory before: %w", err)
	}
	p := newProbe(s)
	if s.MetricsURL != "" {
		if res.MetricsBefore, _, err = p.scrape(ctx); err != nil {
			res.Problems = append(res.Problems, "metrics before: "+err.Error())
		}
	}
	conns := make([]net.Conn, s.Connections)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	req := buildRequest(s.URLs[0], requestTail(s.Addr, s.Headers))
	start := time.Now()
	var mu sync.Mutex
	var h Histogram
	var firstErr error
	next := make(chan int)
	var wg sync.WaitGroup
	for range idleDialers {
		wg.Go(func() {
			for i := range next {
				t0 := time.Now()
				c, status, err := openIdle(s, tc, req)
				mu.Lock()
				res.Requests++
				if err != nil {
					res.Errors++
					res.TransportErrors++
					if firstErr == nil {
						firstErr = err
					}
				} else {
					conns[i] = c
					res.Status[status]++
					if status < 200 || status > 299 {
						res.Errors++
					}
					h.Record(time.Since(t0))
				}
				mu.Unlock()
			}
		})
	}
	for i := range conns {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	for _, c := range conns {
		if c != nil {
			res.IdleConns++
		}
	}
	if res.IdleConns == 0 {
		return nil, fmt.Errorf("no connection opened: %w", firstErr)
	}
	if firstErr != nil {
		res.Problems = append(res.Problems, fmt.Sprintf("%d of %d connections failed; the first: %v", res.TransportErrors, s.Connections, firstErr))
	}
	select {
	case <-time.After(s.Duration):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	after, err := cpustat.GroupMemory(s.ServerPGID)
	if err != nil {
		return nil, fmt.Errorf("server memory after: %w", err)
	}
	if s.MetricsURL != "" && res.MetricsBefore != nil {
		if res.MetricsAfter, _, err = p.scrape(ctx); err != nil {
			res.Problems = append(res.Problems, "metrics after: "+err.Error())
		}
	}
	res.IdleRSSBefore = before.RSS
	res.ServerRSS, res.ServerPeakRSS, res.RSSMeasured = after.RSS, after.Peak, true
	res.Window = time.Since(start)
	res.Latency = summarize(&h)
	return res, nil
}

// openIdle opens one connection of an idle run and makes its one request.
func openIdle(s *Spec, tc *tls.Config, req []byte) (net.Conn, int, error) {
	nc, err := net.DialTimeout("tcp", s.Addr, s.Timeout)
	if err != nil {
		return nil, 0, err
	}
	c := tls.Client(nc, tc)
	_ = c.SetDeadline(time.Now().Add(s.Timeout))
	status, err := func() (int, error) {
		if err := c.Handshake(); err != nil {
			return 0, fmt.Errorf("tls handshake: %w", err)
		}
		if s.TLS.HTTP2 {
			if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
				return 0, fmt.Errorf("negotiated %q, not h2", p)
			}
			return h2Once(c, s.Addr, s.URLs[0], s.Headers)
		}
		if _, err := c.Write(req); err != nil {
			return 0, err
		}
		resp, err := readResponse(bufio.NewReaderSize(c, 4<<10), false)
		if err == nil && resp.close {
			err = errors.New("the server closed the connection after its answer")
		}
		return resp.status, err
	}()
	if err != nil {
		c.Close()
		return nil, 0, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, status, nil
}

// h2Once speaks just enough HTTP/2 on c to send one GET on stream 1 and
// read its answer to the end: the preface and an empty SETTINGS, the
// request's header block, an ACK for the server's SETTINGS, and the
// answer's frames. It answers the :status.
func h2Once(c net.Conn, authority, path string, headers []string) (int, error) {
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		return 0, err
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		return 0, err
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	fields := []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: authority}, {Name: ":path", Value: path}}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		fields = append(fields, hpack.HeaderField{Name: strings.ToLower(strings.TrimSpace(name)), Value: strings.TrimSpace(value)})
	}
	for _, f := range fields {
		if err := enc.WriteField(f); err != nil {
			return 0, err
		}
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		return 0, err
	}
	status := 0
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == ":status" {
			status, _ = strconv.Atoi(f.Value)
		}
	})
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return 0, err
		}
		ended := false
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := fr.WriteSettingsAck(); err != nil {
					return 0, err
				}
			}
		case *http2.HeadersFrame:
			if f.StreamID == 1 {
				if _, err := dec.Write(f.HeaderBlockFragment()); err != nil {
					return 0, err
				}
				ended = f.StreamEnded()
			}
		case *http2.DataFrame:
			ended = f.StreamID == 1 && f.StreamEnded()
		case *http2.RSTStreamFrame:
			return 0, fmt.Errorf("stream reset: %v", f.ErrCode)
		case *http2.GoAwayFrame:
			return 0, fmt.Errorf("GOAWAY: %v", f.ErrCode)
		}
		if ended {
			if status == 0 {
				return 0, errors.New("answer without :status")
			}
			return status, nil
		}
	}
}
