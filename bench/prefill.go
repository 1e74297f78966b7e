package main

import (
	"context"
	"fmt"
	"time"

	"tradergate/bench/load"
)

// prefillLimit bounds a prefill: 100,000 misses at the miss rate the run's
// estimate assumes (plan.go) take 25 s; the bound leaves room for a much
// slower machine.
const prefillLimit = 5 * time.Minute

// prefill stores sc's pages before its window: each of the first
// sc.prefill targets of its templates requested once, identity, by the
// load generator (unmeasured), then the last one fetched until it is a
// hit, as the cache admits entries asynchronously.
func (b *bench) prefill(ctx context.Context, sc *scenario, kind serverKind, srv *server, prefix string) error {
	identity := *sc
	identity.gzip = false
	s := load.Spec{
		Addr:        srv.addr,
		Headers:     b.headers(&identity, kind),
		Mode:        load.ModeSequence,
		SeqStart:    sc.start,
		SeqStep:     1,
		SeqCount:    int64(sc.prefill),
		Connections: b.opt.connections,
		Duration:    prefillLimit,
		ServerCPU:   -1,
		LoadCPU:     -1,
	}
	for _, t := range sc.tmpl {
		s.Templates = append(s.Templates, prefix+t)
	}
	start := time.Now()
	res, err := b.runLoad(ctx, s, string(kind)+".prefill")
	if err != nil {
		return err
	}
	if res.Requests != int64(sc.prefill) || res.Errors > 0 {
		return fmt.Errorf("%d of %d pages answered in %v, %d errors (%s)", res.Requests, sc.prefill, prefillLimit, res.Errors, statusSummary(res))
	}
	fmt.Fprintf(b.stderr, "(%d pages stored in %v) ", sc.prefill, time.Since(start).Round(100*time.Millisecond))
	if kind != kindTradergate {
		return nil
	}
	last := load.SequenceTargets(s.Templates, s.SeqStart, 1, s.SeqCount)[sc.prefill-1]
	_, err = b.fetchHit(ctx, srv, last, false)
	return err
}
