package status

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// Board is where the replicas of a fleet post their summaries, in the
// shared Redis: each replica writes its own key, <prefix>:status:<replica
// id>, with a short expiry and rewrites it every few seconds, so a replica
// that stops (or loses Redis) drops off the board by itself. Its id also
// goes into a set, <prefix>:status-replicas, which is how any replica finds
// the posts to show the fleet: reading the board costs one request per
// replica, however many keys the cache and the limiter keep beside it (a
// SCAN of the keyspace would cost a round trip per few hundred of those,
// on every refresh of the status page).
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

// index is the set of the ids that posted. Every post renews its expiry,
// to indexTTL, so it outlives the fleet by at most that.
func (b *Board) index() string { return b.prefix + ":status-replicas" }

// indexTTL is the same for every replica, whatever its posts' TTL: a
// replica must never shorten the index's life under the others' posts.
// Ids of replicas that stopped are taken out by Collect.
const indexTTL = 24 * time.Hour

// Publish posts r under its ID, replacing the replica's previous post.
func (b *Board) publish(ctx context.Context, r replica) error {
	if r.ID == "" {
		return errors.New("status: publish: replica id is empty")
	}
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("status: publish %s: %w", r.ID, err)
	}
	// Pipelined, not a transaction: in a Cluster the post and the index
	// live in different slots. A post without its id in the index (a
	// failure between the two) is found again at the next publish.
	_, err = b.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, b.key(r.ID), v, b.ttl)
		p.SAdd(ctx, b.index(), r.ID)
		p.Expire(ctx, b.index(), indexTTL)
		return nil
	})
	if err != nil {
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
		err := b.publish(pctx, summary(src()))
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

// Collect reads every replica's post, sorted by id. The ids come from the
// index; a post gone (its replica stopped and the key expired) takes its id
// out of the index too. A replica whose post expired only because it was
// late puts its id back with its next post.
func (b *Board) collect(ctx context.Context) ([]replica, error) {
	ids, err := b.client.SMembers(ctx, b.index()).Result()
	if err != nil {
		return nil, fmt.Errorf("status: read the fleet: %w", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// Pipelined GETs, not MGET: in a Cluster the posts sit in different
	// slots, and the pipeline sends each to its master.
	cmds := make([]*redis.StringCmd, len(ids))
	_, err = b.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.Get(ctx, b.key(id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("status: read the fleet: %w", err)
	}
	var out []replica
	var gone []any
	for i, cmd := range cmds {
		v, err := cmd.Bytes()
		if errors.Is(err, redis.Nil) {
			gone = append(gone, ids[i])
			continue
		}
		var r replica
		if err == nil && json.Unmarshal(v, &r) == nil && r.ID != "" {
			out = append(out, r)
		}
	}
	if len(gone) > 0 {
		// Best effort: an id left behind costs one GET per read until a
		// later read removes it.
		_ = b.client.SRem(ctx, b.index(), gone...).Err()
	}
	slices.SortFunc(out, func(a, b replica) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}
