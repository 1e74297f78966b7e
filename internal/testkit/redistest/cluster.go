package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tradergate/internal/testkit"
)

// clusterTimeout bounds building a cluster: redis-cli's slot assignment and
// every node agreeing that the cluster is ok.
const clusterTimeout = 30 * time.Second

// Cluster is a Redis Cluster of masters only, each a Server of its own on
// loopback. Its methods must be called from the test's goroutine.
type Cluster struct {
	nodes []*Server
}

// StartCluster launches masters redis-servers in cluster mode (at least 3,
// redis-cli's minimum), joins them with redis-cli --cluster create, and waits
// until every node reports cluster_state:ok. t.Cleanup stops them.
//
// redis-cli (Debian package redis-tools) must be on PATH; when it is not,
// the test is skipped, or failed when CI is set, as for redis-server.
func StartCluster(tb testing.TB, masters int) *Cluster {
	tb.Helper()
	if masters < 3 {
		tb.Fatalf("redistest: a Redis Cluster needs at least 3 masters, asked for %d", masters)
	}
	cli := testkit.Binary(tb, "redis-tools", "redis-cli")
	c := &Cluster{}
	for range masters {
		c.nodes = append(c.nodes, launch(tb, clusterNodeArgs, ""))
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range c.nodes {
		for {
			info, err := command(n.Addr(), "", "CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if ctx.Err() != nil {
				tb.Fatalf("redistest: node %s not cluster_state:ok within %v: %v\n%s", n.Addr(), clusterTimeout, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}

// clusterNodeArgs makes a node of a cluster. Its nodes.conf lives in the
// node's directory, so a restarted node rejoins with the same id and slots
// (but, without persistence, none of its keys).
func clusterNodeArgs(dir string, _ int) ([]string, error) {
	return []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		"--cluster-node-timeout", "5000",
	}, nil
}

// Addrs are host:port of every node, the form of redis.addrs.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Nodes are the cluster's servers, to stop or restart one.
func (c *Cluster) Nodes() []*Server { return c.nodes }

// Stop kills every node. Stopping a stopped cluster does nothing.
func (c *Cluster) Stop() {
	for _, n := range c.nodes {
		n.Stop()
	}
}

// String names the nodes, for failure messages.
func (c *Cluster) String() string { return fmt.Sprintf("cluster %v", c.Addrs()) }
