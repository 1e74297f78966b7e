package migration

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// flushLoop adds the counts to Redis every flushEvery until Close, and
// once more then.
func (c *Counts) flushLoop() {
	defer c.done.Done()
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			_ = c.flush(context.Background())
		case <-c.stop:
			_ = c.flush(context.Background())
			return
		}
	}
}

// addScript adds counts to a key's hash and keeps the earliest "first" and
// the latest "last" times: several replicas write the same hash, each with
// what it saw since its last flush. ARGV is triples of op, field, value.
const addScript = `
for i = 1, #ARGV, 3 do
  local op, f, v = ARGV[i], ARGV[i+1], tonumber(ARGV[i+2])
  if op == 'add' then
    redis.call('HINCRBY', KEYS[1], f, v)
  else
    local cur = tonumber(redis.call('HGET', KEYS[1], f))
    if cur == nil or (op == 'max' and v > cur) or (op == 'min' and v < cur) then
      redis.call('HSET', KEYS[1], f, v)
    end
  end
end
return 0`

// flush adds to Redis what each key counted since the last flush that
// succeeded, within redis.timeout. What fails is added next time.
func (c *Counts) flush(ctx context.Context) error {
	// One flush at a time (the loop's, a report's); requests never wait
	// for one: the key list is copied under the read lock.
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.RLock()
	keys := make(map[string]*Key, len(c.keys))
	for id, k := range c.keys {
		keys[id] = k
	}
	c.mu.RUnlock()
	type pending struct {
		k    *Key
		snap snap
		args []any
	}
	var todo []pending
	var hashes []string
	for id, k := range keys {
		s := k.snapshot()
		var args []any
		addInt := func(op, field string, v int64) { args = append(args, op, field, v) }
		if d := s.v1 - k.sent.v1; d > 0 {
			addInt("add", "v1", d)
		}
		if d := s.legacy - k.sent.legacy; d > 0 {
			addInt("add", "legacy", d)
		}
		if s.first != 0 && s.first != k.sent.first {
			addInt("min", "first", s.first)
		}
		if s.last != 0 && s.last != k.sent.last {
			addInt("max", "last", s.last)
		}
		for i, r := range s.routes {
			name := c.routes[i].Name
			if d := r.n - k.sent.routes[i].n; d > 0 {
				addInt("add", "n:"+name, d)
			}
			if r.last != 0 && r.last != k.sent.routes[i].last {
				addInt("max", "t:"+name, r.last)
			}
		}
		if len(args) > 0 {
			todo = append(todo, pending{k, s, args})
			hashes = append(hashes, c.fleet.Key("migration", id))
		}
	}
	if len(todo) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.fleet.Timeout())
	defer cancel()
	cmds, err := c.fleet.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, t := range todo {
			p.Eval(ctx, addScript, []string{hashes[i]}, t.args...)
		}
		return nil
	})
	for i, cmd := range cmds {
		if cmd.Err() == nil {
			t := todo[i]
			t.k.sent.v1, t.k.sent.legacy = t.snap.v1, t.snap.legacy
			t.k.sent.first, t.k.sent.last = t.snap.first, t.snap.last
			copy(t.k.sent.routes, t.snap.routes)
		}
	}
	if err != nil {
		c.log.Debug("migration counts not added to redis; retried", "err", err)
	}
	return err
}

// fleetCounts adds this replica's counts to Redis, then reads every
// replica's sums for ids.
func (c *Counts) fleetCounts(ctx context.Context, ids []string) (map[string]snap, error) {
	if err := c.flush(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.fleet.Timeout())
	defer cancel()
	cmds, err := c.fleet.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			p.HGetAll(ctx, c.fleet.Key("migration", id))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]snap, len(ids))
	for i, id := range ids {
		h, err := cmds[i].(*redis.MapStringStringCmd).Result()
		if err != nil {
			return nil, err
		}
		num := func(f string) int64 { n, _ := strconv.ParseInt(h[f], 10, 64); return n }
		s := snap{v1: num("v1"), legacy: num("legacy"), first: num("first"), last: num("last"),
			routes: make([]routeSent, len(c.routes))}
		for j, r := range c.routes {
			s.routes[j] = routeSent{num("n:" + r.Name), num("t:" + r.Name)}
		}
		out[id] = s
	}
	return out, nil
}
