package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	"tradergate/bench/fixture"
)

// capturePages asks tradergate for every page the ceiling will serve, as
// identity and as gzip, and writes them for the ceiling: the ceiling then
// serves exactly tradergate's bytes for the same URL.
func (b *bench) capturePages(ctx context.Context, scs []*scenario) error {
	var urls []string
	for _, sc := range scs {
		if slices.ContainsFunc(sc.servers, serverKind.isCeiling) {
			for _, u := range sc.urls {
				if !slices.Contains(urls, u) {
					urls = append(urls, u)
				}
			}
		}
	}
	if len(urls) == 0 {
		return nil
	}
	b.procs.setTag("capture")
	defer b.procs.setTag("")
	srv, err := b.startTradergate(ctx, tgVariant{})
	if err != nil {
		return err
	}
	defer srv.stop()
	pages := make([]fixture.Page, 0, len(urls))
	for _, u := range urls {
		id, err := b.fetchHit(ctx, srv, u, false)
		if err != nil {
			return err
		}
		gz, err := b.fetchHit(ctx, srv, u, true)
		if err != nil {
			return err
		}
		p := fixture.Page{Target: u, ContentType: id.header.Get("Content-Type"), Identity: id.body, Header: replayed(id.header)}
		if gz.header.Get("Content-Encoding") == "gzip" {
			p.Gzip, p.GzipHeader = gz.body, replayed(gz.header)
		}
		pages = append(pages, p)
		b.pageSizes = append(b.pageSizes, fmt.Sprintf("`%s`: %d bytes identity, %s", u, len(p.Identity), gzipSize(p.Gzip)))
	}
	b.checkMetrics(ctx, srv)
	b.pagesPath = filepath.Join(b.tmp, "pages.json")
	return fixture.WriteJSON(b.pagesPath, pages)
}

// checkMetrics records in the run notes whether tradergate ran with its
// admin listener (metrics on) and without an access log, as the benchmark's
// rules ask (docs/BENCHMARKS.md, Servers).
func (b *bench) checkMetrics(ctx context.Context, srv *server) {
	if srv.admin == "" {
		return
	}
	a, err := b.get(ctx, "http://"+srv.admin+"/metrics", false, "")
	switch {
	case err != nil:
		b.note("tradergate's admin listener did not answer /metrics: " + err.Error())
	case a.status != 200:
		b.note(fmt.Sprintf("tradergate's admin listener answered /metrics with %d", a.status))
	default:
		b.note(fmt.Sprintf("tradergate ran with its admin listener on (/metrics: %d bytes of metrics)", len(a.body)))
	}
	if b.tgSections["log"] {
		b.note("tradergate ran with log.access: false")
	}
}

// replayed is what the ceiling+headers row sends of h: every header but
// the ones the ceiling writes itself and the ones net/http sets.
func replayed(h http.Header) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, v := range h {
		switch k {
		case "Content-Type", "Content-Length", "Content-Encoding", "Vary", "Date":
			continue
		}
		out[k] = slices.Clone(v)
	}
	return out
}

func gzipSize(gz []byte) string {
	if gz == nil {
		return "no gzip copy (under cache.compress_min_bytes)"
	}
	return fmt.Sprintf("%d bytes gzip", len(gz))
}

// fetchHit gets u from tradergate until it is served from the cache.
func (b *bench) fetchHit(ctx context.Context, srv *server, u string, gzip bool) (*httpAnswer, error) {
	for attempt := 0; ; attempt++ {
		a, err := b.get(ctx, "http://"+srv.addr+u, gzip, b.clientKey)
		if err != nil {
			return nil, err
		}
		if a.status != 200 {
			return nil, fmt.Errorf("tradergate %s: status %d: %.300s", u, a.status, a.body)
		}
		if a.header.Get("X-Cache") == "HIT" {
			return a, nil
		}
		if attempt == 40 {
			return nil, fmt.Errorf("tradergate %s: %w", u, errNotHit)
		}
		time.Sleep(25 * time.Millisecond)
	}
}
