package status

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Board is where the replicas of a fleet post their summaries, in the
// shared Redis: each replica writes its own key, <prefix>:status:<replica
// id>, with a short expiry and rewrites it every few seconds, so a replica
// that stops (or loses Redis) drops off the board by itself. Any replica
// reads them all to show the fleet.
type Board struct {
	client  redis.UniversalClient
	prefix  string
	ttl     time.Duration
	onError func(error)
}

// BoardOptions configure a Board.
type BoardOptions struct {
	// Prefix starts the keys (redis.prefix); zero: "tradergate".
	Prefix string
	// TTL is how long a posted summary lasts; zero: 15 seconds. Publish
	// at least twice per TTL, or a live replica blinks off the board.
	TTL time.Duration
	// OnError receives Run's failed publishes (Redis unreachable, say);
	// nil: they are dropped, and the replica goes missing from the
	// board, which is how operators see it.
	OnError func(error)
}

// NewBoard returns a Board on client (fleet.Conn's Client in the edge).
func NewBoard(client redis.UniversalClient, o BoardOptions) *Board {
	return &Board{
		client:  client,
		prefix:  cmp.Or(o.Prefix, "tradergate"),
		ttl:     cmp.Or(o.TTL, 15*time.Second),
		onError: o.OnError,
	}
}

func (b *Board) key(id string) string { return b.prefix + ":status:" + id }

// Publish posts r under its ID, replacing the replica's previous post.
func (b *Board) Publish(ctx context.Context, r Replica) error {
	if r.ID == "" {
		return errors.New("status: publish: replica id is empty")
	}
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("status: publish %s: %w", r.ID, err)
	}
	if err := b.client.Set(ctx, b.key(r.ID), v, b.ttl).Err(); err != nil {
		return fmt.Errorf("status: publish %s: %w", r.ID, err)
	}
	return nil
}

// Run publishes Summary(src()) now and then every interval until ctx is
// done. The caller owns the goroutine that runs it; it returns when ctx is.
func (b *Board) Run(ctx context.Context, every time.Duration, src func() Snapshot) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, every)
		err := b.Publish(pctx, Summary(src()))
		cancel()
		if err != nil && b.onError != nil && ctx.Err() == nil {
			b.onError(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// scanCount is the COUNT hint of each SCAN: a fleet has few replicas, but
// the keyspace it is scanned in holds the rate limiter's and the cache's
// keys too.
const scanCount = 500

// Collect reads every replica's post, sorted by id. In a Redis Cluster the
// posts hash to different masters, so it scans each master.
func (b *Board) Collect(ctx context.Context) ([]Replica, error) {
	match := escapeGlob(b.prefix) + ":status:*"
	var (
		mu  sync.Mutex
		out []Replica
	)
	collect := func(ctx context.Context, c redis.Cmdable) error {
		rs, err := collectNode(ctx, c, match)
		mu.Lock()
		out = append(out, rs...)
		mu.Unlock()
		return err
	}
	var err error
	if cc, ok := b.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return collect(ctx, c) })
	} else {
		err = collect(ctx, b.client)
	}
	slices.SortFunc(out, func(a, b Replica) int { return cmp.Compare(a.ID, b.ID) })
	if err != nil {
		return out, fmt.Errorf("status: read the fleet: %w", err)
	}
	return out, nil
}

// collectNode reads the posts one server holds. Their keys may sit in
// different Cluster slots, so they are read with pipelined GETs, not MGET.
func collectNode(ctx context.Context, c redis.Cmdable, match string) ([]Replica, error) {
	var keys []string
	var cursor uint64
	for {
		batch, next, err := c.Scan(ctx, cursor, match, scanCount).Result()
		if err != nil {
			return nil, err
		}
		keys = append(keys, batch...)
		if cursor = next; cursor == 0 {
			break
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.StringCmd, len(keys))
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.Get(ctx, k)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	var out []Replica
	for _, cmd := range cmds {
		v, err := cmd.Bytes()
		if err != nil {
			continue // expired between SCAN and GET
		}
		var r Replica
		if json.Unmarshal(v, &r) == nil && r.ID != "" {
			out = append(out, r)
		}
	}
	return out, nil
}

// escapeGlob escapes the characters SCAN's MATCH treats as a pattern.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}
