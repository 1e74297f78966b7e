package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"tradergate/proxy/fleet"
	"tradergate/proxy/native"
)

// GET /shadow with Redis: each replica posts its native report on the
// fleet's board of "shadow" posts (fleet.Posts: <prefix>:shadow:<replica
// id>, with a short expiry, and the set <prefix>:shadow-replicas), and
// rewrites it every few seconds and whenever it is asked for the report;
// the replica asked reads the others' posts and merges them with its own
// report (native.Merge). A replica that stops drops off when its post
// expires. Reading costs two round trips whatever the keyspace holds.

const (
	// shadowPostTTL is how long a post lasts; shadowPostEvery how often a
	// replica rewrites it, well within the TTL.
	shadowPostTTL   = 15 * time.Second
	shadowPostEvery = 5 * time.Second
)

// ShadowFleet is the native.Aggregator of the fleet, on its Redis.
type ShadowFleet struct {
	conn    *fleet.Conn
	posts   *fleet.Posts
	replica string
	log     *slog.Logger
	ttl     atomic.Int64 // a post's expiry, a time.Duration
}

func NewShadowFleet(conn *fleet.Conn, replica string, log *slog.Logger) *ShadowFleet {
	f := &ShadowFleet{conn: conn, posts: conn.Posts("shadow"), replica: replica, log: log}
	f.ttl.Store(int64(shadowPostTTL))
	return f
}

// Aggregate posts local, then merges it with every other replica's post;
// each of the two round trips is bounded by redis.timeout. An error means
// Redis did not answer: the caller shows local.
func (f *ShadowFleet) Aggregate(ctx context.Context, local native.Report) (native.Report, error) {
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
func (f *ShadowFleet) post(ctx context.Context, rep native.Report, members bool) ([]string, error) {
	v, err := json.Marshal(native.ReplicaReport{Replica: f.replica, Report: rep})
	if err != nil {
		return nil, fmt.Errorf("shadow report of %s: %w", f.replica, err)
	}
	ctx, cancel := context.WithTimeout(ctx, f.conn.Timeout())
	defer cancel()
	ttl := time.Duration(f.ttl.Load())
	var ids []string
	if members {
		ids, err = f.posts.PostMembers(ctx, f.replica, v, ttl)
	} else {
		err = f.posts.Post(ctx, f.replica, v, ttl)
	}
	if err != nil {
		return nil, fmt.Errorf("post the shadow report of %s: %w", f.replica, err)
	}
	return ids, nil
}

// read returns the posts of ids but this replica's; a post that does not
// decode is left out, with a warning.
func (f *ShadowFleet) read(ctx context.Context, ids []string) ([]native.ReplicaReport, error) {
	others := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == f.replica })
	if len(others) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, f.conn.Timeout())
	defer cancel()
	posts, err := f.posts.Read(ctx, others)
	if err != nil {
		return nil, fmt.Errorf("read the fleet's shadow reports: %w", err)
	}
	var out []native.ReplicaReport
	for _, p := range posts {
		var r native.ReplicaReport
		if json.Unmarshal(p.Value, &r) == nil && r.Replica == p.ID {
			out = append(out, r)
		} else {
			f.log.Warn("shadow report: a replica's post is unreadable; left out", "replica", p.ID)
		}
	}
	return out, nil
}

// run posts src() now and every shadowPostEvery until ctx ends, so that
// the replica shows in the others' reports when nobody asks it. A post
// that fails is tried again at the next tick.
func (f *ShadowFleet) run(ctx context.Context, src func() native.Report) {
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

// SetPostTTL sets how long this replica's posts last, from its next post
// on (tests shorten it).
func (f *ShadowFleet) SetPostTTL(ttl time.Duration) { f.ttl.Store(int64(ttl)) }
