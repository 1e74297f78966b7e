package fleet

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Posts is a board in the shared Redis where each replica keeps one post of
// a kind ("status", "shadow"), raw bytes under <prefix>:<kind>:<replica
// id>, with a short expiry that the replica renews by posting again; so a
// replica that stops, or loses Redis, drops off by itself. Its id also goes
// into a set, <prefix>:<kind>-replicas, which is how a replica finds the
// others' posts: reading costs a round trip for the set and one for the
// posts, however many keys the cache and the limiter keep beside them (a
// SCAN of the keyspace would cost a round trip per few hundred of those).
//
// A post, and a read of the posts, is a pipeline, never a transaction: in
// a Cluster the posts and the index live in different slots. Posts bounds
// no call; the caller's context does. Its errors are Redis's (but for a
// post without an id), for the caller to say what failed.
type Posts struct {
	client redis.UniversalClient
	prefix string
	kind   string
}

// NewPosts returns the board of kind on client, its keys starting with
// prefix (redis.prefix; its default when empty).
func NewPosts(client redis.UniversalClient, prefix, kind string) *Posts {
	return &Posts{client: client, prefix: cmp.Or(prefix, defaultPrefix), kind: kind}
}

// Posts is the board of kind on the Conn's client and prefix.
func (c *Conn) Posts(kind string) *Posts { return NewPosts(c.client, c.prefix, kind) }

// Post is one replica's post, as read.
type Post struct {
	ID    string
	Value []byte
}

// postIndexTTL is the index's expiry, renewed by every post and the same
// for every replica, whatever its posts' TTL: no replica may shorten the
// index's life under the others' posts. It outlives the fleet by at most
// that; the ids of replicas that stopped are taken out by the reads.
const postIndexTTL = 24 * time.Hour

// errNoID refuses a post without an id, which would be one key shared by
// every replica that lacks one.
var errNoID = errors.New("fleet: post: replica id is empty")

// Key is where id's post lives.
func (p *Posts) Key(id string) string { return p.prefix + ":" + p.kind + ":" + id }

// Index is the set of the ids that posted.
func (p *Posts) Index() string { return p.prefix + ":" + p.kind + "-replicas" }

// Post writes v as id's post, lasting ttl, replacing id's previous one, and
// puts id in the index. A post whose id missed the index (a failure between
// the two) is found again after id's next post.
func (p *Posts) Post(ctx context.Context, id string, v []byte, ttl time.Duration) error {
	_, err := p.post(ctx, id, v, ttl, false)
	return err
}

// PostMembers is Post that also returns the ids in the index, read in the
// same round trip, id among them.
func (p *Posts) PostMembers(ctx context.Context, id string, v []byte, ttl time.Duration) ([]string, error) {
	return p.post(ctx, id, v, ttl, true)
}

func (p *Posts) post(ctx context.Context, id string, v []byte, ttl time.Duration, members bool) ([]string, error) {
	if id == "" {
		return nil, errNoID
	}
	var ids *redis.StringSliceCmd
	_, err := p.client.Pipelined(ctx, func(pl redis.Pipeliner) error {
		pl.Set(ctx, p.Key(id), v, ttl)
		pl.SAdd(ctx, p.Index(), id)
		pl.Expire(ctx, p.Index(), postIndexTTL)
		if members {
			ids = pl.SMembers(ctx, p.Index())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if ids == nil {
		return nil, nil
	}
	return ids.Val(), nil
}

// ReadAll reads the post of every id in the index; see Read.
func (p *Posts) ReadAll(ctx context.Context) ([]Post, error) {
	ids, err := p.client.SMembers(ctx, p.Index()).Result()
	if err != nil {
		return nil, err
	}
	return p.Read(ctx, ids)
}

// Read returns the posts of ids, in their order. An id whose post expired
// (its replica stopped, or was late) is left out and taken out of the
// index; a late replica puts it back with its next post. Any other failure
// of a GET fails the read: a read that missed some replicas would pass a
// part of the fleet for the whole.
func (p *Posts) Read(ctx context.Context, ids []string) ([]Post, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	// Pipelined GETs, not MGET: in a Cluster the posts sit in different
	// slots, and the pipeline sends each to its master.
	cmds := make([]*redis.StringCmd, len(ids))
	_, err := p.client.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = pl.Get(ctx, p.Key(id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]Post, 0, len(ids))
	var gone []any
	for i, cmd := range cmds {
		v, err := cmd.Bytes()
		switch {
		case err == nil:
			out = append(out, Post{ID: ids[i], Value: v})
		case errors.Is(err, redis.Nil):
			gone = append(gone, ids[i])
		default:
			// The pipeline's error is its first failed command's: a
			// missing post before this one hid it.
			return nil, err
		}
	}
	if len(gone) > 0 {
		// Best effort: an id left behind costs one GET per read until a
		// later read takes it out.
		_ = p.client.SRem(ctx, p.Index(), gone...).Err()
	}
	return out, nil
}
