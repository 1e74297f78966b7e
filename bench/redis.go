package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"tradergate/bench/load"
)

// startRedis starts a throwaway redis-server for the fleet rows, on a free
// port, without persistence, pinned to the load generator's CPU: it stands
// for a Redis on another machine, so its own work is not the edge's CPU.
// "" path: none installed, the rows are skipped.
func (b *bench) startRedis(ctx context.Context) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(b.tmp, "redis-")
	if err != nil {
		return nil, err
	}
	return b.serve(ctx, "redis", b.opt.loadCPU, "127.0.0.1:"+strconv.Itoa(port), 10*time.Second, b.redis,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
}

// redisFlush empties the Redis of the fleet rows (FLUSHALL), so that each
// row starts with nothing shared, as each starts a fresh server. A raw
// RESP exchange keeps the harness free of a client library for two
// commands (this and INFO, bench/load).
func redisFlush(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("*1\r\n$8\r\nFLUSHALL\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+OK" {
		return fmt.Errorf("unexpected reply %q", strings.TrimSpace(line))
	}
	return nil
}

// l2StoresMetric counts the pages a replica stored in the shared tier.
const l2StoresMetric = "tradergate_l2_stores_total"

// waitL2Stores waits until the other replica says it stored n pages in
// the shared tier (its stores may follow its answers), up to 30s. It
// returns a note when that could not be seen, "" when it was.
func (b *bench) waitL2Stores(ctx context.Context, other *server, n int) string {
	if other.admin == "" {
		return "the other replica has no admin listener: its shared tier stores were not checked before the window"
	}
	var stored float64
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		a, err := b.get(ctx, "http://"+other.admin+"/metrics", false, "")
		if err != nil {
			return "the other replica's /metrics: " + err.Error()
		}
		v, ok := load.ParseMetrics(a.body, []string{l2StoresMetric})[l2StoresMetric]
		if !ok {
			return "the other replica exports no " + l2StoresMetric + ": its shared tier stores were not checked before the window"
		}
		if stored = v; stored >= float64(n) {
			return ""
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Sprintf("the other replica stored %.0f of %d pages in the shared tier before the window", stored, n)
}
