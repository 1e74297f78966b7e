package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"tradergate/proxy/fleet"
	"tradergate/proxy/native"
)

// GET /shadow with Redis: each replica posts its native report under a
// key of its own, <prefix>:shadow:<replica id>, with a short expiry, and
// rewrites it every few seconds and whenever it is asked for the report;
// its id goes into a set, <prefix>:shadow-replicas, where the replica
// asked finds the others' posts, and merges them with its own report
// (native.Merge). A replica that stops drops off when its post expires,
// as on the status board (proxy/status/board.go). Reading costs two round
// trips whatever the keyspace holds.

const (
	// shadowPostTTL is how long a post lasts; shadowPostEvery how often a
	// replica rewrites it, well within the TTL.
	shadowPostTTL   = 15 * time.Second
	shadowPostEvery = 5 * time.Second
	// shadowIndexTTL is the index's expiry, renewed by every post and the
	// same for every replica, so none shortens it under the others' posts;
	// ids whose post expired are taken out when the posts are read.
	shadowIndexTTL = 24 * time.Hour
)

// shadowFleet is the native.Aggregator of the fleet, on its Redis.
type shadowFleet struct {
	conn    *fleet.Conn
	replica string
	log     *slog.Logger
	ttl     atomic.Int64 // a post's expiry, a time.Duration
}

func newShadowFleet(conn *fleet.Conn, replica string, log *slog.Logger) *shadowFleet {
	f := &shadowFleet{conn: conn, replica: replica, log: log}
	f.ttl.Store(int64(shadowPostTTL))
	return f
}

// shadowAggregator is native.Options.Fleet: the fleet's, with Redis;
// nil without.
func (s *Server) shadowAggregator() native.Aggregator {
	if s.status.shadow == nil {
		return nil
	}
	return s.status.shadow
}

func (f *shadowFleet) key(id string) string { return f.conn.Key("shadow", id) }

func (f *shadowFleet) index() string { return f.conn.Key("shadow-replicas") }

// Aggregate posts local, then merges it with every other replica's post;
// each of the two round trips is bounded by redis.timeout. An error means
// Redis did not answer: the caller shows local.
func (f *shadowFleet) Aggregate(ctx context.Context, local native.Report) (native.Report, error) {
	ids, err := f.post(ctx, local, true)
	if err != nil {
		return native.Report{}, err
	}
	reps, err := f.read(ctx, ids)
	if err != nil {
		return native.Report{}, err
	}
	return native.Merge(append([]native.ReplicaReport{{Replica: f.replica, Report: local}}, reps...)), nil
}

// post writes rep as this replica's, with its id in the index, and with
// members, returns the ids in the index.
func (f *shadowFleet) post(ctx context.Context, rep native.Report, members bool) ([]string, error) {
	v, err := json.Marshal(native.ReplicaReport{Replica: f.replica, Report: rep})
	if err != nil {
		return nil, fmt.Errorf("shadow report of %s: %w", f.replica, err)
	}
	ctx, cancel := context.WithTimeout(ctx, f.conn.Timeout())
	defer cancel()
	var ids *redis.StringSliceCmd
	// Pipelined, not a transaction: in a Cluster the post and the index
	// live in different slots. A post whose id missed the index is found
	// again after the next post.
	_, err = f.conn.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, f.key(f.replica), v, time.Duration(f.ttl.Load()))
		p.SAdd(ctx, f.index(), f.replica)
		p.Expire(ctx, f.index(), shadowIndexTTL)
		if members {
			ids = p.SMembers(ctx, f.index())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("post the shadow report of %s: %w", f.replica, err)
	}
	if ids == nil {
		return nil, nil
	}
	return ids.Val(), nil
}

// read returns the posts of ids but this replica's; an id whose post
// expired leaves the index, and a post that does not decode is left out.
func (f *shadowFleet) read(ctx context.Context, ids []string) ([]native.ReplicaReport, error) {
	var others []string
	for _, id := range ids {
		if id != f.replica {
			others = append(others, id)
		}
	}
	if len(others) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, f.conn.Timeout())
	defer cancel()
	// Pipelined GETs, not MGET: in a Cluster the posts sit in different
	// slots, and the pipeline sends each to its master.
	cmds := make([]*redis.StringCmd, len(others))
	_, err := f.conn.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range others {
			cmds[i] = p.Get(ctx, f.key(id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read the fleet's shadow reports: %w", err)
	}
	var out []native.ReplicaReport
	var gone []any
	for i, cmd := range cmds {
		v, err := cmd.Bytes()
		if errors.Is(err, redis.Nil) {
			gone = append(gone, others[i])
			continue
		}
		var r native.ReplicaReport
		if err == nil && json.Unmarshal(v, &r) == nil && r.Replica == others[i] {
			out = append(out, r)
		} else {
			f.log.Warn("shadow report: a replica's post is unreadable; left out", "replica", others[i])
		}
	}
	if len(gone) > 0 {
		// Best effort: an id left behind costs one GET per read until a
		// later read takes it out.
		_ = f.conn.Client().SRem(ctx, f.index(), gone...).Err()
	}
	return out, nil
}

// run posts src() now and every shadowPostEvery until ctx ends, so that
// the replica shows in the others' reports when nobody asks it. A post
// that fails is tried again at the next tick.
func (f *shadowFleet) run(ctx context.Context, src func() native.Report) {
	t := time.NewTicker(shadowPostEvery)
	defer t.Stop()
	for {
		if _, err := f.post(ctx, src(), false); err != nil && ctx.Err() == nil {
			f.log.Debug("shadow report not posted; retried", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
