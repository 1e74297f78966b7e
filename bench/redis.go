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
)

// startRedis starts a throwaway redis-server for the limiter's Redis store
// row, on a free port, without persistence, pinned to the load generator's
// CPU: it stands for a Redis on another machine, so its own work is not
// the edge's CPU. "" path: none installed, the row is skipped.
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

// redisCommands reads total_commands_processed from INFO stats, to show
// that the limiter really went to Redis. A raw RESP exchange keeps the
// harness free of a client library for one command.
func redisCommands(addr string) (int64, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("*2\r\n$4\r\nINFO\r\n$5\r\nstats\r\n")); err != nil {
		return 0, err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		return 0, fmt.Errorf("redis INFO: unexpected reply %q", head)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return 0, fmt.Errorf("redis INFO: no total_commands_processed")
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
}
