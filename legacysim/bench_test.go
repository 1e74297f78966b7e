package legacysim

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"
)

// The sim is the upstream of load benchmarks; these keep its own cost in
// view.

func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		New(Config{End: testEnd})
	}
}

func BenchmarkGenBook(b *testing.B) {
	s := New(Config{End: testEnd})
	b.ReportAllocs()
	for b.Loop() {
		s.genBook(0)
	}
}

func benchServe(b *testing.B, s *Sim, target string, gzip bool) {
	b.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	if gzip {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	w := &discardWriter{h: http.Header{}}
	s.ServeHTTP(w, req) // warm: book generation, encoded items
	if w.status != http.StatusOK {
		b.Fatalf("status %d", w.status)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := &discardWriter{h: http.Header{}}
		for pb.Next() {
			clear(w.h)
			s.ServeHTTP(w, req)
		}
	})
	b.SetBytes(w.n)
}

type discardWriter struct {
	h      http.Header
	status int
	n      int64
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(s int)   { w.status = s }
func (w *discardWriter) Write(p []byte) (int, error) {
	w.n = int64(len(p))
	return io.Discard.Write(p)
}

func BenchmarkOrderbook1000(b *testing.B) {
	s := New(Config{End: testEnd, Now: func() time.Time { return testEnd }})
	q := url.Values{"marketId": {s.Markets()[0].ID}}
	for _, gz := range []bool{false, true} {
		name := "plain"
		if gz {
			name = "gzip"
		}
		b.Run(name, func(b *testing.B) { benchServe(b, s, "/open-api/v1/orderbook/events?"+q.Encode(), gz) })
	}
}

func BenchmarkActivity100(b *testing.B) {
	s := New(Config{End: testEnd, Now: func() time.Time { return testEnd }})
	benchServe(b, s, "/open-api/v1/trader/"+s.Wallets()[0]+"/activity?limit=100", false)
}

func BenchmarkTx(b *testing.B) {
	s := New(Config{End: testEnd, Now: func() time.Time { return testEnd }})
	benchServe(b, s, "/open-api/v1/tx/"+s.TradeTxs()[3], false)
}
