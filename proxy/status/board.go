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

	"tradergate/proxy/fleet"
)

// Board is where the replicas of a fleet post their summaries, in the
// shared Redis: each replica writes its own post, <prefix>:status:<replica
// id>, with a short expiry, and rewrites it every few seconds, so a replica
// that stops (or loses Redis) drops off the board by itself; the ids are
// in the set <prefix>:status-replicas (fleet.Posts). Reading the board
// costs two round trips, the index and then a pipeline of one GET per
// replica, however many keys the cache and the limiter keep beside it.
type Board struct {
	posts   *fleet.Posts
	ttl     time.Duration
	onError func(error)
}

// BoardOptions configure a Board.
type BoardOptions struct {
	// Prefix starts the keys (redis.prefix); zero: its default.
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
		posts:   fleet.NewPosts(client, o.Prefix, "status"),
		ttl:     cmp.Or(o.TTL, 15*time.Second),
		onError: o.OnError,
	}
}

// Publish posts r under its ID, replacing the replica's previous post.
func (b *Board) publish(ctx context.Context, r replica) error {
	if r.ID == "" {
		return errors.New("status: publish: replica id is empty")
	}
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("status: publish %s: %w", r.ID, err)
	}
	if err := b.posts.Post(ctx, r.ID, v, b.ttl); err != nil {
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

// Collect reads every replica's post, sorted by id. A post that does not
// decode is left out: the page shows the others.
func (b *Board) collect(ctx context.Context) ([]replica, error) {
	posts, err := b.posts.ReadAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("status: read the fleet: %w", err)
	}
	var out []replica
	for _, p := range posts {
		var r replica
		if json.Unmarshal(p.Value, &r) == nil && r.ID != "" {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b replica) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}
