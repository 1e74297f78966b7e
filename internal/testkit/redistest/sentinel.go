package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// SentinelMasterName is the name under which StartSentinel's sentinel
// monitors its master (redis.master_name).
const SentinelMasterName = "tradergate-test"

// Sentinel is a master and one sentinel monitoring it with quorum 1, each a
// Server of its own on loopback. Its methods must be called from the test's
// goroutine.
type Sentinel struct {
	master, sentinel *Server
}

// StartSentinel launches a master and a sentinel (redis-server --sentinel)
// that monitors it. t.Cleanup stops both.
func StartSentinel(tb testing.TB) *Sentinel {
	tb.Helper()
	master := Start(tb)
	// The config file has to be writable: a sentinel rewrites it with what
	// it learns.
	args := func(dir string, _ int) ([]string, error) {
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %[1]s 5000\n",
			SentinelMasterName, master.port)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			return nil, err
		}
		return []string{conf, "--sentinel"}, nil
	}
	return &Sentinel{master: master, sentinel: launch(tb, args, "")}
}

// Addr is host:port of the sentinel (redis.addrs).
func (s *Sentinel) Addr() string { return s.sentinel.Addr() }

// MasterName is the monitored master's name (redis.master_name).
func (s *Sentinel) MasterName() string { return SentinelMasterName }

// Master is the monitored redis-server, to stop or restart it.
func (s *Sentinel) Master() *Server { return s.master }

// Stop kills the sentinel and the master.
func (s *Sentinel) Stop() {
	s.sentinel.Stop()
	s.master.Stop()
}
