package main

import (
	"context"
	"net"

	"tradergate/bench/cmd/internal/serve"

	"github.com/valyala/fasthttp"
)

// serveFastHTTP serves pages with fasthttp, set up as tradergate's
// HTTP/1.1 front sets it up (no Server header, no default Content-Type,
// the front's timeouts and read buffer from the flags) and writing an
// answer as that front does: names left as given and each field added
// once (Header.Add after DisableNormalizing, not Set, which rewrites the
// name and looks for an earlier field), the body handed over without a
// copy.
func serveFastHTTP(ctx context.Context, ln net.Listener, pages map[string]*page) error {
	h := func(c *fasthttp.RequestCtx) {
		p := pages[string(c.Request.Header.RequestURI())]
		if p == nil {
			c.Error("404 page not found", fasthttp.StatusNotFound)
			return
		}
		a, gz := p.choose(c.Request.Header.HasAcceptEncoding("gzip"))
		resp := &c.Response
		resp.Header.DisableNormalizing()
		resp.Header.Add("Content-Type", p.contentType)
		resp.Header.Add("Vary", "Accept-Encoding")
		if gz {
			resp.Header.Add("Content-Encoding", "gzip")
		}
		for _, f := range a.fields {
			resp.Header.Add(f.name, f.value)
		}
		resp.SetBodyRaw(a.body)
	}
	srv := &fasthttp.Server{
		Handler:                      h,
		ReadTimeout:                  limits.read,
		WriteTimeout:                 limits.write,
		IdleTimeout:                  limits.idle,
		ReadBufferSize:               limits.readBuffer,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		DisablePreParseMultipartForm: true,
		CloseOnShutdown:              true,
	}
	return serve.Until(ctx, func() error { return srv.Serve(ln) }, srv.ShutdownWithContext)
}
