// Command passthrough is the benchmark's pass-through baseline: the
// standard library's httputil.ReverseProxy in front of the simulated legacy
// host, with no cache, no rewrite, no auth and no limits. It maps the /v1
// paths onto the upstream's base (…/open-api) and sends its own bearer
// key, as tradergate does, so that both call the same upstream paths.
//
// The transport is http.DefaultTransport's settings with a larger idle
// pool. Like tradergate's client it leaves compression on: a request
// without Accept-Encoding goes upstream asking for gzip and is inflated
// here, the standard library's default behaviour.
//
//	passthrough -listen 127.0.0.1:9003 -upstream http://127.0.0.1:9001/open-api -key K
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"

	"tradergate/bench/cmd/internal/serve"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "passthrough:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on")
	upstream := flag.String("upstream", "", "upstream base URL, e.g. http://127.0.0.1:9001/open-api")
	key := flag.String("key", "", "bearer key sent upstream")
	flag.Parse()

	target, err := url.Parse(*upstream)
	if err != nil || target.Host == "" {
		return fmt.Errorf("-upstream %q: want an absolute URL", *upstream)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// The default keeps 2 idle connections per host; under 32 concurrent
	// clients that would mean a new upstream connection for most requests.
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 1024
	auth := "Bearer " + *key
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set("Authorization", auth)
		},
		Transport: tr,
		ErrorLog:  log.New(os.Stderr, "passthrough: ", 0),
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	ctx, stop := serve.Signalled()
	defer stop()
	return serve.HTTP(ctx, ln, rp)
}
