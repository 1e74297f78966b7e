package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// tgConfigTemplate is bench/tradergate.yaml.tmpl: the configuration the
// benchmark runs tradergate with.
//
//go:embed tradergate.yaml.tmpl
var tgConfigTemplate string

// tgConfig fills the template. Admin and Log are sections that older
// builds (a run may measure any binary, -tradergate) do not know; strict config decoding refuses them, so the
// harness drops a section the binary rejects and says so in the report.
type tgConfig struct {
	Port, AdminPort int
	UpstreamURL     string
	KeySHA256       string
	RedisAddr       string
	CacheMaxBytes   int64
	NoPageFiles     bool
	// AllPageFiles puts every form in a page file, whatever its length.
	AllPageFiles bool
	// CertFile and KeyFile turn TLS on (server.tls mode files).
	CertFile, KeyFile string
	Admin, Log        bool
	// MaxConnections, when set, is server.max_connections, with no cap
	// per address (every connection of the benchmark comes from
	// loopback): the idle rows.
	MaxConnections int
	// StreamsMaxPerKey, when set, is streams.max_per_key: the fanout
	// rows' subscribers all use the bench key.
	StreamsMaxPerKey int
}

// tgVariant is how a row's tradergate differs from the default
// configuration.
type tgVariant struct {
	// redisAddr is the replicas' shared Redis ("": none, the limiter
	// counts in memory).
	redisAddr string
	// cacheBytes is cache.max_bytes (0: the default).
	cacheBytes int64
	// noPageFiles turns page files off (cache.sendfile_min_bytes: -1).
	noPageFiles bool
	// allPageFiles sends every form from a page file
	// (cache.sendfile_min_bytes: 1): the page size sweep.
	allPageFiles bool
	// tls serves TLS with the run's certificate.
	tls bool
	// otherReplica is the fleet's replica that fetches pages the measured
	// one then reads from the shared tier: it runs on the load CPU, named
	// tradergate-other.
	otherReplica bool
	// maxConns, when set, is how many client connections it must take
	// (the idle rows), beyond its default cap.
	maxConns int
	// upstream, when set, is the legacy host's base URL instead of the
	// shared one (the fanout rows' live host); streams the streams one
	// key may hold (the fanout rows' subscribers).
	upstream string
	streams  int
	// replica, from 1, names one edge of the fanout rows' fleet
	// (tradergate-r<n>), on the server CPU with the others.
	replica int
	// allCPUs runs it on the server and the load CPU, GOMAXPROCS=2
	// (-fanout-server-cpus 2).
	allCPUs bool
}

// defaultCacheBytes is config.yaml's cache.max_bytes. The harness writes
// it into every configuration rather than leaving it to the default, so
// that the memory target is read against the figure the edge ran with.
const defaultCacheBytes = 256 << 20

func renderTGConfig(c tgConfig) ([]byte, error) {
	return renderTemplate("tradergate.yaml", tgConfigTemplate, c)
}

// renderTemplate fills one of the harness's config templates; a field the
// template names and data lacks is an error, not an empty string.
func renderTemplate(name, text string, data any) ([]byte, error) {
	t, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// hashKey is what `tradergate hash-key` prints for a key (keys[].sha256).
// It is computed here rather than imported from proxy, so that the harness
// builds while the edge is being changed.
func hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// unknownSection finds the top-level section named by tradergate's strict
// decoder in "line 40: admin: unknown field" (proxy/config/yaml.go).
var unknownSection = regexp.MustCompile(`line \d+: ([a-z_]+)(?:\.[a-z_.]+)?: unknown field`)

// accessLogMarker is in every access log line of tradergate's JSON logger
// (proxy/observe.go: LogAttrs(..., "request", ...)).
const accessLogMarker = `"msg":"request"`

// server is a server under test, or the upstream, once it listens.
type server struct {
	addr  string // host:port
	admin string // tradergate's admin listener, "" when none
	tls   bool   // serves TLS with the run's certificate
	proc  *proc
	// scratch is the server's own directory under the run's scratch
	// directory (nginx's cache, Varnish's and Nchan's work directories),
	// removed when the server stops. Kept to the end of the run, nginx's
	// cache files of the miss rows reach gigabytes on tmpfs over a -repeat
	// run, and the rows after them start on a machine with that much less
	// free memory: on a VM whose freed memory goes back to the host, their
	// fresh pages then cost a fault on the host too (docs/BENCHMARKS.md).
	scratch string
}

func (s *server) stop() {
	if s == nil {
		return
	}
	if s.proc != nil {
		s.proc.stop(5 * time.Second)
	}
	if s.scratch != "" {
		_ = os.RemoveAll(s.scratch)
	}
}

// startTradergate starts the edge on the server CPU against the shared
// upstream, configured as v says. A section the binary refuses is dropped
// for the rest of the run.
func (b *bench) startTradergate(ctx context.Context, v tgVariant) (*server, error) {
	redisAddr, cacheBytes := v.redisAddr, v.cacheBytes
	if cacheBytes <= 0 {
		cacheBytes = defaultCacheBytes
	}
	for {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		adminPort, err := freePort()
		if err != nil {
			return nil, err
		}
		c := tgConfig{
			Port: port, AdminPort: adminPort, UpstreamURL: b.upstreamBase(), KeySHA256: hashKey(b.clientKey),
			RedisAddr: redisAddr, CacheMaxBytes: cacheBytes, NoPageFiles: v.noPageFiles, AllPageFiles: v.allPageFiles,
			Admin: b.tgSections["admin"], Log: b.tgSections["log"],
		}
		if v.tls {
			c.CertFile, c.KeyFile = b.cert.cert, b.cert.key
		}
		if v.upstream != "" {
			c.UpstreamURL = v.upstream
		}
		c.StreamsMaxPerKey = v.streams
		if v.maxConns > 0 && b.tgSections["conncap"] {
			c.MaxConnections = v.maxConns + 64 // and the harness's own
		}
		data, err := renderTGConfig(c)
		if err != nil {
			return nil, err
		}
		name := "tradergate"
		switch {
		case v.otherReplica:
			name = "tradergate-other"
		case v.replica > 0:
			name = fmt.Sprintf("tradergate-r%d", v.replica)
		}
		path := filepath.Join(b.tmp, name+".yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
		// The config is kept with the results (it holds only the key's
		// hash; the legacy key is in the environment).
		keep := "tradergate.yaml"
		switch {
		case v.otherReplica:
			keep = name + ".yaml"
		case v.streams > 0 && v.replica > 0:
			keep = "tradergate-fanout-fleet.yaml" // the replicas differ in their ports only
		case v.streams > 0:
			keep = "tradergate-fanout.yaml"
		case v.tls && c.MaxConnections > 0:
			keep = "tradergate-idle.yaml"
		case v.tls:
			keep = "tradergate-tls.yaml"
		case redisAddr != "":
			keep = "tradergate-redis.yaml"
		case v.noPageFiles:
			keep = "tradergate-heap.yaml"
		case v.allPageFiles:
			keep = "tradergate-file.yaml"
		case cacheBytes != defaultCacheBytes:
			keep = fmt.Sprintf("tradergate-cache-%dMiB.yaml", cacheBytes>>20)
		}
		_ = os.WriteFile(filepath.Join(b.out, keep), data, 0o644)
		cpu := b.opt.serverCPU
		if v.otherReplica {
			cpu = b.opt.loadCPU
		}
		o := startOpts{
			env:       []string{"TRADERGATE_BENCH_UPSTREAM_KEY=" + b.simKey},
			dropLines: accessLogMarker,
		}
		if v.allCPUs {
			o.cpuList = fmt.Sprintf("%d,%d", b.opt.serverCPU, b.opt.loadCPU)
		}
		p, err := b.procs.start(name, cpu, o, b.bins.tradergate, "-config", path)
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		err = waitPort(ctx, p, addr, 15*time.Second)
		if err == nil {
			s := &server{addr: addr, proc: p, tls: v.tls}
			if c.Admin {
				s.admin = "127.0.0.1:" + strconv.Itoa(adminPort)
			}
			return s, nil
		}
		p.stop(2 * time.Second)
		tail := p.stderrTail(2000)
		if strings.Contains(tail, "server.max_connections: unknown field") && b.tgSections["conncap"] {
			b.tgSections["conncap"] = false
			b.note("this tradergate build has no server.max_connections (no connection cap), so the idle rows ran without it")
			continue
		}
		if m := unknownSection.FindStringSubmatch(tail); m != nil && b.tgSections[m[1]] {
			b.tgSections[m[1]] = false
			b.note(fmt.Sprintf("this tradergate build refuses the %q config section (%s), so the benchmark ran without it", m[1], m[0]))
			continue
		}
		return nil, fmt.Errorf("tradergate: %w\n%s", err, tail)
	}
}
