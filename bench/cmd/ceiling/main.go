// Command ceiling is the benchmark's ceiling: a server that answers each
// known request target with bytes held in memory, the same bytes
// tradergate served for it (identity, and gzip when tradergate had a gzip
// copy). Nothing a real edge does per request (auth, limits, cache lookup,
// headers) happens here, so it bounds what any Go edge on the same core
// can reach with the same HTTP server. With -headers it also sends the
// rate limit, cache and request id headers tradergate sent with each page,
// so that the cost of the headers the contract asks for is told apart from
// the edge's work.
//
// -engine picks the HTTP/1.1 server: net/http, or fasthttp (tradergate's
// own HTTP/1.1 front, configured as tradergate configures it).
//
// -pprof serves Go's CPU profile on a second address, so that the
// benchmark's -pprof can set the ceiling's profile beside tradergate's.
//
//	ceiling -listen 127.0.0.1:9002 -pages pages.json [-headers] [-engine fasthttp] [-pprof 127.0.0.1:9003]
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strconv"
	"time"

	"tradergate/bench/cmd/internal/serve"
	"tradergate/bench/fixture"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ceiling:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on")
	pagesPath := flag.String("pages", "", "JSON list of pages to serve")
	headers := flag.Bool("headers", false, "also send the other headers tradergate sent with each page")
	engine := flag.String("engine", "nethttp", "HTTP/1.1 server: nethttp or fasthttp")
	flag.DurationVar(&limits.read, "read-timeout", 5*time.Second, "fasthttp: time to read a request")
	flag.DurationVar(&limits.write, "write-timeout", 0, "fasthttp: time to write an answer (0: none)")
	flag.DurationVar(&limits.idle, "idle-timeout", 2*time.Minute, "fasthttp: keep-alive wait for the next request")
	flag.IntVar(&limits.readBuffer, "read-buffer", 0, "fasthttp: read buffer size, the bound on a request's header (0: fasthttp's default)")
	pprofAddr := flag.String("pprof", "", "also serve /debug/pprof/profile on this address")
	flag.Parse()

	serveWith, ok := engines[*engine]
	if !ok {
		return fmt.Errorf("-engine %q: want nethttp or fasthttp", *engine)
	}
	var list []fixture.Page
	if err := fixture.ReadJSON(*pagesPath, &list); err != nil {
		return fmt.Errorf("pages %s: %w", *pagesPath, err)
	}
	pages := make(map[string]*page, len(list))
	for i := range list {
		pages[list[i].Target] = newPage(&list[i], *headers)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	ctx, stop := serve.Signalled()
	defer stop()
	if *pprofAddr != "" {
		pln, err := net.Listen("tcp", *pprofAddr)
		if err != nil {
			return fmt.Errorf("-pprof: %w", err)
		}
		done := make(chan error, 1)
		go func() { done <- serve.HTTP(ctx, pln, profileHandler()) }()
		defer func() { <-done }() // it stops with ctx, after the pages' server
		defer stop()
	}
	return serveWith(ctx, ln, pages)
}

// profileHandler serves the CPU profile, as tradergate's admin listener
// does.
func profileHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	return mux
}

// limits are the fasthttp server's, given by the harness as tradergate's
// HTTP/1.1 front has them.
var limits struct {
	read, write, idle time.Duration
	readBuffer        int
}

// engines serve pages on ln until ctx ends.
var engines = map[string]func(ctx context.Context, ln net.Listener, pages map[string]*page) error{
	"nethttp":  serveNetHTTP,
	"fasthttp": serveFastHTTP,
}

// page is a Page prepared for serving: lengths formatted and headers laid
// out once, so that the ceiling does no per-request work beyond the
// server's own.
type page struct {
	contentType    string
	identity, gzip answer
	hasGzip        bool
}

// answer is one encoding of a page.
type answer struct {
	body   []byte
	length string
	// extra are the headers tradergate sent besides the ones the ceiling
	// writes itself (none without -headers), as a map for net/http and
	// as sorted pairs for fasthttp.
	extra  http.Header
	fields []field
}

type field struct{ name, value string }

func newPage(p *fixture.Page, headers bool) *page {
	out := &page{contentType: p.ContentType, hasGzip: p.Gzip != nil}
	out.identity = newAnswer(p.Identity, p.Header, headers)
	if out.hasGzip {
		out.gzip = newAnswer(p.Gzip, p.GzipHeader, headers)
	}
	return out
}

func newAnswer(body []byte, h map[string][]string, headers bool) answer {
	a := answer{body: body, length: strconv.Itoa(len(body))}
	if !headers {
		return a
	}
	a.extra = http.Header(h)
	for _, k := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[k] {
			a.fields = append(a.fields, field{k, v})
		}
	}
	return a
}

// choose is the answer for a client that accepts gzip or not.
func (p *page) choose(acceptsGzip bool) (a *answer, gzip bool) {
	if acceptsGzip && p.hasGzip {
		return &p.gzip, true
	}
	return &p.identity, false
}
