package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"tradergate/internal/testkit/redistest"
)

var bg = context.Background()

// env is a getenv over a fixed map.
func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func open(t *testing.T, cfg Config, getenv func(string) string, opt Options) *Conn {
	t.Helper()
	if getenv == nil {
		getenv = env()
	}
	c, err := Open(cfg, getenv, opt)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// value reads a gauge or counter.
// openOn opens a Conn on srv with the tests' usual timeout.
func openOn(t *testing.T, srv *redistest.Server) *Conn {
	t.Helper()
	return open(t, Config{Addrs: []string{srv.Addr()}, Timeout: 2 * time.Second}, nil, Options{})
}

func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.Gauge != nil {
		return d.Gauge.GetValue()
	}
	return d.Counter.GetValue()
}
