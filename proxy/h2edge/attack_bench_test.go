package h2edge_test

import (
	"bytes"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"tradergate/proxy/h2edge"
)

// The attacks of docs/ARCHITECTURE.md's "HTTP/2 against abuse", measured
// against a server with the edge's settings (max_header_bytes 16 KiB):
//
//	go test -run '^$' -bench 'Attack' -benchtime 1x ./proxy/h2edge
//
// Each reports what the attack cost the server and what a victim on
// another connection saw. Figures: docs/BENCHMARKS.md.

// edgeServer is h2edge as proxy/front/serve.go sets it up, at the default
// server section; nopending takes the budget and the request timeout
// out, for comparison.
func edgeServer(handler func(*h2edge.Stream), nopending bool) *h2edge.Server {
	srv := &h2edge.Server{
		Handler:               handler,
		MaxHeaderListSize:     4 * 16 << 10,
		MaxPendingHeaderBytes: 16 * 16 << 10,
		RequestTimeout:        10 * time.Second,
	}
	if nopending {
		srv.MaxPendingHeaderBytes = 1 << 40
		srv.RequestTimeout = time.Hour
	}
	return srv
}

// victim sends GETs one after the other on its own connection until stop
// is closed, and returns their latencies.
func victim(b *testing.B, addr string, stop <-chan struct{}) []time.Duration {
	c := dialRaw(b, addr)
	// The answers' DATA spends the connection's window: open it for good.
	if err := c.fr.WriteWindowUpdate(0, 1<<31-1-65535); err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	for id := uint32(1); ; id += 2 {
		select {
		case <-stop:
			return took
		default:
		}
		c.nc.SetDeadline(time.Now().Add(20 * time.Second))

		start := time.Now()
		c.headers(id, true, ":path", "/victim")
		if status, _, _ := c.answer(id); status != "200" {
			b.Fatalf("victim: status %s", status)
		}
		took = append(took, time.Since(start))
	}
}

func p50(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}

func quietP50(b *testing.B, addr string) time.Duration {
	stop := make(chan struct{})
	time.AfterFunc(300*time.Millisecond, func() { close(stop) })
	return p50(victim(b, addr, stop))
}

func rssBytes() float64 {
	b, _ := os.ReadFile("/proc/self/status")
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return float64(kb << 10)
		}
	}
	return 0
}

func heapInuse() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse)
}

// 30 connections each open 250 requests of a 60 KB header list and end
// none of them. Reported: the process's live heap and RSS with the
// requests sent (client and server share the process; the client holds
// little), how many attacking connections the server cut, and the
// victim's median latency against its quiet one.
func BenchmarkAttackPinnedHeaders(b *testing.B) {
	for _, nopending := range []bool{false, true} {
		name := map[bool]string{false: "defended", true: "no-budget"}[nopending]
		b.Run(name, func(b *testing.B) {
			for range b.N {
				pinnedHeaders(b, nopending)
			}
		})
	}
}

func pinnedHeaders(b *testing.B, nopending bool) {
	var cut atomic.Int64
	srv := edgeServer(echo, nopending)
	srv.ConnClosed = func(r string) {
		if r == h2edge.ReasonHeaderBudget {
			cut.Add(1)
		}
	}
	addr := serve(b, srv)
	quiet := quietP50(b, addr)
	base := heapInuse()
	stop := make(chan struct{})
	var vic []time.Duration
	var vwg sync.WaitGroup
	vwg.Go(func() { vic = victim(b, addr, stop) })

	const conns, streams, size = 30, 250, 60_000
	value := strings.Repeat("v", size)
	var wg sync.WaitGroup
	attackers := make([]*rawConn, conns)
	for i := range conns {
		c := dialRaw(b, addr)
		attackers[i] = c
		wg.Go(func() {
			go func() { // read what the server sends, until it closes
				for {
					if _, err := c.fr.ReadFrame(); err != nil {
						return
					}
				}
			}()
			var block bytes.Buffer
			enc := hpack.NewEncoder(&block)
			for s := range streams {
				block.Reset()
				for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "edge"}, {":path", "/x"}} {
					enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
				}
				enc.WriteField(hpack.HeaderField{Name: "x-pad", Value: value, Sensitive: true})
				if writeBlock(c.fr, uint32(1+2*s), block.Bytes()) != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	time.Sleep(200 * time.Millisecond) // the last frames read
	heap, rss := heapInuse()-base, rssBytes()
	close(stop)
	vwg.Wait()
	for _, c := range attackers {
		c.nc.Close()
	}
	b.ReportMetric(heap/(1<<20), "heap-MiB")
	b.ReportMetric(rss/(1<<20), "rss-MiB")
	b.ReportMetric(float64(cut.Load()), "conns-cut")
	b.ReportMetric(float64(len(vic)), "victim-answers")
	b.ReportMetric(float64(p50(vic).Microseconds()), "victim-p50-µs")
	b.ReportMetric(float64(quiet.Microseconds()), "quiet-p50-µs")
}

// writeBlock sends a header block without END_STREAM, in as many
// CONTINUATION frames as it needs.
func writeBlock(fr *http2.Framer, id uint32, block []byte) error {
	const max = 16 << 10
	first := block[:min(len(block), max)]
	block = block[len(first):]
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndHeaders: len(block) == 0}); err != nil {
		return err
	}
	for len(block) > 0 {
		part := block[:min(len(block), max)]
		block = block[len(part):]
		if err := fr.WriteContinuation(id, len(block) == 0, part); err != nil {
			return err
		}
	}
	return nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// SETTINGS frames against 250 open streams, as fast as the client can
// write them: of 2,730 window sizes each (16 KB), which the server
// refuses at once, and of 100 (the most it takes), which each walk the
// streams once until the flood budget ends the connection. Reported: the
// frames the client sent until it read the server's GOAWAY (the server
// read fewer: some were on their way), and the process's CPU time, both
// ends, per MB sent.
func BenchmarkAttackSettings(b *testing.B) {
	for _, entries := range []int{2730, 100} {
		b.Run(strconv.Itoa(entries)+"-entries", func(b *testing.B) {
			release := make(chan struct{})
			addr := serve(b, edgeServer(func(st *h2edge.Stream) {
				<-release
				echo(st)
			}, false))
			defer close(release)
			settings := make([]http2.Setting, entries)
			for i := range settings {
				settings[i] = http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(1000 + i%2)}
			}
			var frames, bytes int
			var cpu time.Duration
			for range b.N {
				c := dialRaw(b, addr)
				for id := uint32(1); id < 500; id += 2 {
					c.headers(id, true)
				}
				gone := make(chan struct{}) // the GOAWAY came, or the end
				go func() {
					defer close(gone)
					for {
						f, err := c.fr.ReadFrame()
						if _, ok := f.(*http2.GoAwayFrame); ok || err != nil {
							return
						}
					}
				}()
				start := cpuTime()
			send:
				for {
					select {
					case <-gone:
						break send
					default:
					}
					if c.fr.WriteSettings(settings...) != nil {
						break
					}
					frames++
					bytes += 9 + 6*entries
				}
				<-gone
				cpu += cpuTime() - start
				c.nc.Close()
			}
			b.ReportMetric(float64(frames)/float64(b.N), "frames-sent-before-goaway/conn")
			b.ReportMetric(cpu.Seconds()*1000/(float64(bytes)/1e6), "cpu-ms/MB")
		})
	}
}

// Two clients that open a stream and reset it at once, again and again,
// reconnecting when cut off, for 2 s, while a victim makes requests on
// its own connection. Reported: the resets the server read on a
// connection before it closed it, and the victim's median latency
// against its quiet one.
func BenchmarkAttackRapidReset(b *testing.B) {
	for range b.N {
		var handled, cut atomic.Int64
		srv := edgeServer(func(st *h2edge.Stream) {
			if st.Path != "/victim" {
				handled.Add(1)
			}
			echo(st)
		}, false)
		srv.ConnClosed = func(r string) {
			if r == h2edge.ReasonRapidReset {
				cut.Add(1)
			}
		}
		addr := serve(b, srv)
		quiet := quietP50(b, addr)
		stop := make(chan struct{})
		var vic []time.Duration
		var wg sync.WaitGroup
		wg.Go(func() { vic = victim(b, addr, stop) })
		var conns atomic.Int64
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					c := dialRaw(b, addr)
					conns.Add(1)
					go func() {
						for {
							if _, err := c.fr.ReadFrame(); err != nil {
								return
							}
						}
					}()
					for id := uint32(1); ; id += 2 {
						if c.tryHeaders(id, true) != nil || c.fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
							break
						}
						if id%64 == 1 {
							select {
							case <-stop:
								c.nc.Close()
								return
							default:
							}
						}
					}
					c.nc.Close()
				}
			})
		}
		time.Sleep(2 * time.Second)
		close(stop)
		wg.Wait()
		// Each stream read is handed to a handler before its reset.
		b.ReportMetric(float64(handled.Load())/float64(max(cut.Load(), 1)), "resets-read/conn")
		b.ReportMetric(float64(conns.Load()), "conns")
		b.ReportMetric(float64(cut.Load()), "conns-cut")
		b.ReportMetric(float64(p50(vic).Microseconds()), "victim-p50-µs")
		b.ReportMetric(float64(quiet.Microseconds()), "quiet-p50-µs")
	}
}
