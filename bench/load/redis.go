package load

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// RedisCommandStats reads INFO commandstats from the redis-server at addr:
// the calls it served so far by command. A raw RESP exchange keeps the
// load generator free of a client library for one command.
func RedisCommandStats(addr string) (map[string]int64, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n")); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("redis INFO: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if !strings.HasPrefix(head, "$") || err != nil || n < 0 {
		return nil, fmt.Errorf("redis INFO: unexpected reply %q", strings.TrimSpace(head))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, fmt.Errorf("redis INFO: %w", err)
	}
	return ParseCommandStats(string(body))
}

// ParseCommandStats reads the calls of each command from the text of INFO
// commandstats, lines like
//
//	cmdstat_get:calls=21,usec=175,usec_per_call=8.33,rejected_calls=0,failed_calls=0
//
// Command names are lower case; a subcommand keeps its "|" ("client|list").
func ParseCommandStats(text string) (map[string]int64, error) {
	out := map[string]int64{}
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		name, fields, ok := strings.Cut(line, ":")
		if !ok {
			continue // "# Commandstats", blank lines
		}
		cmd, ok := strings.CutPrefix(name, "cmdstat_")
		if !ok {
			continue
		}
		found := false
		for f := range strings.SplitSeq(fields, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("redis commandstats %s: calls %q", cmd, v)
				}
				out[cmd], found = n, true
			}
		}
		if !found {
			return nil, fmt.Errorf("redis commandstats %s: no calls= in %q", cmd, fields)
		}
	}
	return out, nil
}

// RedisDelta is what after counts beyond before, by command, without the
// INFO calls that read them (the harness's own) and without commands that
// did not move.
func RedisDelta(before, after map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for cmd, n := range after {
		if cmd == "info" {
			continue
		}
		if d := n - before[cmd]; d > 0 {
			out[cmd] = d
		}
	}
	return out
}
