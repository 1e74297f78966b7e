// Command ceiling is the benchmark's ceiling: a plain net/http server that
// answers each known request target with bytes held in memory, the same
// bytes tradergate served for it (identity, and gzip when tradergate had a
// gzip copy). Nothing a real edge does per request (auth, limits, cache
// lookup, headers) happens here, so it bounds what any Go edge on the same
// core can reach. With -headers it also sends the rate limit, cache and
// request id headers tradergate sent with each page, so that the cost of
// the headers the contract asks for is told apart from the edge's work.
//
//	ceiling -listen 127.0.0.1:9002 -pages pages.json [-headers]
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

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
	flag.Parse()

	var list []fixture.Page
	if err := fixture.ReadJSON(*pagesPath, &list); err != nil {
		return fmt.Errorf("pages %s: %w", *pagesPath, err)
	}
	pages := make(map[string]*page, len(list))
	for i := range list {
		p := &list[i]
		pages[p.Target] = &page{Page: p, identityLen: strconv.Itoa(len(p.Identity)), gzipLen: strconv.Itoa(len(p.Gzip))}
	}

	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := pages[r.URL.RequestURI()]
		if p == nil {
			http.NotFound(w, r)
			return
		}
		hd := w.Header()
		hd["Content-Type"] = []string{p.ContentType}
		hd["Vary"] = []string{"Accept-Encoding"}
		body, n, extra := p.Identity, p.identityLen, p.Header
		if p.Gzip != nil && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			body, n, extra = p.Gzip, p.gzipLen, p.GzipHeader
			hd["Content-Encoding"] = []string{"gzip"}
		}
		if *headers {
			// Held values, as tradergate's own are per request: the
			// cost measured is net/http's, of sending that many headers.
			maps.Copy(hd, extra)
		}
		// An explicit length: without it net/http chunks bodies over its
		// buffer size, which no peer here does.
		hd["Content-Length"] = []string{n}
		_, _ = w.Write(body)
	})

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// page is a Page with its lengths formatted once.
type page struct {
	*fixture.Page
	identityLen, gzipLen string
}
