package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tradergate/internal/testkit"
	"tradergate/internal/testkit/redistest"
)

func postsCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ids are the posts' ids, sorted: the index is a set, in no order.
func ids(posts []Post) []string {
	out := make([]string, len(posts))
	for i, p := range posts {
		out[i] = p.ID
	}
	slices.Sort(out)
	return out
}

func mustPost(t *testing.T, ctx context.Context, p *Posts, id, v string, ttl time.Duration) {
	t.Helper()
	if err := p.Post(ctx, id, []byte(v), ttl); err != nil {
		t.Fatalf("post %s: %v", id, err)
	}
}

// Two replicas post; either reads both, under the keys the status page and
// the /shadow report name (redis.prefix in docs/CONFIGURATION.md).
func TestPostsRoundTrip(t *testing.T) {
	ctx := postsCtx(t)
	srv := redistest.Start(t)
	c := open(t, Config{Addrs: []string{srv.Addr()}, Prefix: "tg", Timeout: 2 * time.Second}, nil, Options{})
	a, b := c.Posts("status"), c.Posts("status")
	mustPost(t, ctx, a, "edge-a", "old", time.Minute)
	mustPost(t, ctx, a, "edge-a", "A", time.Minute) // replaces
	mustPost(t, ctx, b, "edge-b", "B", time.Minute)
	// Another kind, and another deployment on the same Redis, are apart.
	mustPost(t, ctx, c.Posts("shadow"), "edge-s", "S", time.Minute)
	mustPost(t, ctx, NewPosts(c.Client(), "other", "status"), "stranger", "X", time.Minute)

	got, err := b.ReadAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(got), []string{"edge-a", "edge-b"}) {
		t.Fatalf("read %+v", got)
	}
	// Read keeps the order asked.
	got, err = a.Read(ctx, []string{"edge-b", "edge-a"})
	if err != nil || len(got) != 2 || got[0].ID != "edge-b" || string(got[0].Value) != "B" || string(got[1].Value) != "A" {
		t.Fatalf("read %+v, %v", got, err)
	}

	d := direct(t, srv.Addr(), "")
	if v, err := d.Get(ctx, "tg:status:edge-a").Result(); err != nil || v != "A" {
		t.Errorf("tg:status:edge-a = %q, %v", v, err)
	}
	if m, err := d.SMembers(ctx, "tg:status-replicas").Result(); err != nil || !slices.Equal(slices.Sorted(slices.Values(m)), []string{"edge-a", "edge-b"}) {
		t.Errorf("tg:status-replicas = %v, %v", m, err)
	}
	if m, err := d.SMembers(ctx, "tg:shadow-replicas").Result(); err != nil || !slices.Equal(m, []string{"edge-s"}) {
		t.Errorf("tg:shadow-replicas = %v, %v", m, err)
	}
	// The post lasts its TTL; the index a day, whatever the posts' TTL.
	if ttl, err := d.TTL(ctx, "tg:status:edge-a").Result(); err != nil || ttl <= 0 || ttl > time.Minute {
		t.Errorf("the post's TTL is %v, %v; want at most a minute", ttl, err)
	}
	if ttl, err := d.TTL(ctx, "tg:status-replicas").Result(); err != nil || ttl <= time.Hour || ttl > postIndexTTL {
		t.Errorf("the index's TTL is %v, %v; want about %v", ttl, err, postIndexTTL)
	}

	if err := a.Post(ctx, "", []byte("x"), time.Minute); err == nil {
		t.Error("a post without an id was accepted")
	}
	if got, err := a.Read(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("reading no ids: %+v, %v", got, err)
	}
}

// A replica that stops posting drops off when its post expires, and the
// read that finds it gone takes its id out of the index; posting again
// puts it back.
func TestPostsExpiry(t *testing.T) {
	ctx := postsCtx(t)
	srv := redistest.Start(t)
	c := openOn(t, srv)
	p := c.Posts("status")
	mustPost(t, ctx, p, "stays", "s", time.Minute)
	mustPost(t, ctx, p, "goes", "g", 200*time.Millisecond)
	// Redis expires the key on its own clock; wait for it.
	testkit.Eventually(t, "the short-lived post to expire", func() bool {
		got, err := p.ReadAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Equal(ids(got), []string{"stays"})
	})
	d := direct(t, srv.Addr(), "")
	if m, err := d.SMembers(ctx, p.Index()).Result(); err != nil || !slices.Equal(m, []string{"stays"}) {
		t.Errorf("index %v, %v; want [stays]", m, err)
	}
	// Read of the ids a caller holds does the same.
	mustPost(t, ctx, p, "late", "l", 200*time.Millisecond)
	testkit.Eventually(t, "the late post to expire", func() bool {
		got, err := p.Read(ctx, []string{"stays", "late"})
		if err != nil {
			t.Fatal(err)
		}
		return len(got) == 1 && got[0].ID == "stays"
	})
	if ok, err := d.SIsMember(ctx, p.Index(), "late").Result(); err != nil || ok {
		t.Errorf("late still in the index: %v, %v", ok, err)
	}
	mustPost(t, ctx, p, "late", "l", time.Minute)
	if got, err := p.ReadAll(ctx); err != nil || !slices.Equal(ids(got), []string{"late", "stays"}) {
		t.Errorf("after the late replica posted again: %+v, %v", got, err)
	}
}

// PostMembers returns the index as it stands after the post, the poster
// among them, in the same round trip.
func TestPostsMembers(t *testing.T) {
	ctx := postsCtx(t)
	srv := redistest.Start(t)
	c := openOn(t, srv)
	p := c.Posts("shadow")
	m, err := p.PostMembers(ctx, "edge-a", []byte("A"), time.Minute)
	if err != nil || !slices.Equal(m, []string{"edge-a"}) {
		t.Fatalf("first post's members %v, %v", m, err)
	}
	mustPost(t, ctx, p, "edge-b", "B", time.Minute)
	m, err = p.PostMembers(ctx, "edge-a", []byte("A2"), time.Minute)
	if err != nil || !slices.Equal(slices.Sorted(slices.Values(m)), []string{"edge-a", "edge-b"}) {
		t.Fatalf("members %v, %v", m, err)
	}
	got, err := p.Read(ctx, m)
	if err != nil || !slices.Equal(ids(got), []string{"edge-a", "edge-b"}) {
		t.Fatalf("read %+v, %v", got, err)
	}
	for _, g := range got {
		if g.ID == "edge-a" && string(g.Value) != "A2" {
			t.Errorf("edge-a's post is %q, want the one just made", g.Value)
		}
	}
	// Post alone does not read the index.
	d := direct(t, srv.Addr(), "")
	if err := d.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	mustPost(t, ctx, p, "edge-b", "B2", time.Minute)
	stats, err := d.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stats, "cmdstat_smembers:") {
		t.Errorf("Post read the index:\n%s", stats)
	}
}

// In a Cluster the posts hash to every master and the index to one: the
// pipelines send each command to its own, and a read finds them all.
func TestPostsCluster(t *testing.T) {
	ctx := postsCtx(t)
	cl := redistest.StartCluster(t, 3)
	c := open(t, Config{Addrs: cl.Addrs(), Prefix: "tg", Timeout: 2 * time.Second}, nil, Options{})
	cc, ok := c.Client().(*redis.ClusterClient)
	if !ok {
		t.Fatalf("a %T, want a cluster client", c.Client())
	}
	p := c.Posts("status")
	const n = 12
	masters := map[string]bool{}
	var want []string
	for i := range n {
		id := fmt.Sprintf("edge-%02d", i)
		want = append(want, id)
		m, err := p.PostMembers(ctx, id, []byte(id), time.Minute)
		if err != nil || len(m) != i+1 {
			t.Fatalf("post %s: members %v, %v", id, m, err)
		}
		node, err := cc.MasterForKey(ctx, p.Key(id))
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true
	}
	// The posts must be on more than one master, or the test proves
	// nothing.
	if len(masters) < 2 {
		t.Fatalf("the posts landed on %d master(s)", len(masters))
	}
	got, err := p.ReadAll(ctx)
	if err != nil || !slices.Equal(ids(got), want) {
		t.Fatalf("read %v, %v; want %v", ids(got), err, want)
	}
	for _, g := range got {
		if string(g.Value) != g.ID {
			t.Errorf("%s's post is %q", g.ID, g.Value)
		}
	}
	// An expired post leaves the index from whichever master it was on.
	mustPost(t, ctx, p, "edge-03", "edge-03", 200*time.Millisecond)
	testkit.Eventually(t, "edge-03 to expire", func() bool {
		got, err := p.ReadAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(got) == n-1 && !slices.Contains(ids(got), "edge-03")
	})
	if ok, err := c.Client().SIsMember(ctx, p.Index(), "edge-03").Result(); err != nil || ok {
		t.Errorf("edge-03 still in the index: %v, %v", ok, err)
	}
}

// Without Redis, posting and reading fail, for the caller to work alone.
func TestPostsRedisDown(t *testing.T) {
	ctx := postsCtx(t)
	srv := redistest.Start(t)
	c := openOn(t, srv)
	p := c.Posts("status")
	mustPost(t, ctx, p, "edge-a", "A", time.Minute)
	srv.Stop()
	if err := p.Post(ctx, "edge-a", []byte("A"), time.Minute); err == nil {
		t.Error("a post to a stopped Redis succeeded")
	}
	if _, err := p.PostMembers(ctx, "edge-a", []byte("A"), time.Minute); err == nil {
		t.Error("a post to a stopped Redis succeeded")
	}
	if _, err := p.ReadAll(ctx); err == nil {
		t.Error("ReadAll from a stopped Redis succeeded")
	}
	if _, err := p.Read(ctx, []string{"edge-a"}); err == nil {
		t.Error("Read from a stopped Redis succeeded")
	}
}
