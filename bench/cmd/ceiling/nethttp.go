package main

import (
	"context"
	"maps"
	"net"
	"net/http"
	"strings"

	"tradergate/bench/cmd/internal/serve"
)

// serveNetHTTP serves pages with net/http.
func serveNetHTTP(ctx context.Context, ln net.Listener, pages map[string]*page) error {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := pages[r.URL.RequestURI()]
		if p == nil {
			http.NotFound(w, r)
			return
		}
		a, gz := p.choose(strings.Contains(r.Header.Get("Accept-Encoding"), "gzip"))
		hd := w.Header()
		hd["Content-Type"] = []string{p.contentType}
		hd["Vary"] = []string{"Accept-Encoding"}
		if gz {
			hd["Content-Encoding"] = []string{"gzip"}
		}
		// Held values, as tradergate's own are per request: the cost
		// measured is net/http's, of sending that many headers.
		maps.Copy(hd, a.extra)
		// An explicit length: without it net/http chunks bodies over its
		// buffer size, which no peer here does.
		hd["Content-Length"] = []string{a.length}
		_, _ = w.Write(a.body)
	})
	return serve.HTTP(ctx, ln, h)
}
