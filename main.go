// Command tradergate is a caching edge proxy that serves the variant A /v1
// contract in front of the legacy (variant B) host.
//
//	tradergate -config config.yaml   run the edge
//	tradergate -demo                 run it against an in-process simulated legacy host
//	tradergate new-key               print a new random key and its SHA-256 for keys[].sha256
//	tradergate hash-key [-weak]      read a key on stdin, print its SHA-256 for keys[].sha256
//	tradergate check -config FILE    load FILE as start-up and SIGHUP do; exit 1 on problems
//
// This file only wires: flags, configuration, the parts, serving, signals.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/redis/go-redis/v9"

	"tradergate/cache/configerr"
	"tradergate/legacysim"
	"tradergate/proxy"
)

// embeddedConfig is config.yaml as shipped: the defaults `-demo` runs on.
//
//go:embed config.yaml
var embeddedConfig []byte

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "tradergate:", err)
		os.Exit(exitCode(err))
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) > 0 && args[0] == "hash-key" {
		return hashKey(args[1:], stdin, stdout)
	}
	if len(args) > 0 && args[0] == "new-key" {
		return newKey(args[1:], stdout)
	}
	if len(args) > 0 && args[0] == "check" {
		return check(args[1:], stdout, stderr, getenv)
	}
	fs := flag.NewFlagSet("tradergate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage:
  tradergate [flags]             run the edge (-config FILE, or the embedded config.yaml)
  tradergate -demo [flags]       run it against an in-process simulated legacy host
  tradergate new-key             print a new random key and its SHA-256 for keys[].sha256
  tradergate hash-key [-weak]    read a key on stdin, print its SHA-256 for keys[].sha256
  tradergate check -config FILE  check FILE as start-up and reload do (exit 1: problems)

Flags:
`)
		fs.PrintDefaults()
	}
	m := &Main{Stdout: stdout, Getenv: getenv}
	fs.StringVar(&m.ConfigPath, "config", "", "configuration file (default: the embedded config.yaml)")
	fs.BoolVar(&m.Demo, "demo", false, "start a simulated legacy host in-process and point the edge at it")
	fs.StringVar(&m.Listen, "listen", "", "client listen address, overriding server.listen")
	fs.StringVar(&m.AdminListen, "admin-listen", "", `admin listen address, overriding admin.listen ("off": none)`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (commands: new-key, hash-key, check)", fs.Arg(0))
	}
	m.LogOutput = stderr
	return m.Run(ctx)
}

// hashKey prints the SHA-256 of the key read on stdin. The key is never
// echoed; one trailing newline (from echo or a terminal) is not part of it.
// A key of less than minKeyBits (keyBits) is refused unless -weak is
// given: a key anyone can guess protects nothing.
func hashKey(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("tradergate hash-key", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	weak := fs.Bool("weak", false, "hash a key of less than 128 bits all the same")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return usageError{errors.New("hash-key: the only flag is -weak; the key goes on stdin")}
	}
	key, err := io.ReadAll(io.LimitReader(stdin, 4096))
	if err != nil {
		return fmt.Errorf("read key: %w", err)
	}
	k := strings.TrimSuffix(strings.TrimSuffix(string(key), "\n"), "\r")
	if k == "" || strings.TrimSpace(k) != k {
		return errors.New("hash-key: give the key on stdin, without surrounding spaces")
	}
	if bits := keyBits(k); bits < minKeyBits && !*weak {
		return fmt.Errorf("hash-key: the key has about %.0f bits of entropy, under %d: make one with `tradergate new-key`, or give -weak to hash it anyway", bits, minKeyBits)
	}
	_, err = fmt.Fprintln(stdout, proxy.HashKey(k))
	return err
}

// minKeyBits is the least entropy hash-key accepts without -weak.
const minKeyBits = 128

// keyBits estimates a key's entropy as its length times log2 of the
// alphabet its character classes span (lower case 26, upper case 26,
// digits 10, other printable ASCII 33, anything else 128): the entropy the
// key would have were every character drawn at random from that alphabet.
// It is an upper bound: it cannot see that a key is a word or a pattern,
// only that it is too short or too plain to be random enough.
func keyBits(k string) float64 {
	var lower, upper, digit, other, high bool
	for i := 0; i < len(k); i++ {
		switch c := k[i]; {
		case 'a' <= c && c <= 'z':
			lower = true
		case 'A' <= c && c <= 'Z':
			upper = true
		case '0' <= c && c <= '9':
			digit = true
		case c >= 0x20 && c < 0x7f:
			other = true
		default:
			high = true
		}
	}
	alphabet := 0
	for _, class := range []struct {
		used bool
		size int
	}{{lower, 26}, {upper, 26}, {digit, 10}, {other, 33}, {high, 128}} {
		if class.used {
			alphabet += class.size
		}
	}
	return float64(len(k)) * math.Log2(float64(alphabet))
}

// newKey prints a new API key, 256 random bits in base64url after the
// prefix "tg_", and its SHA-256 as keys[].sha256 wants it. The key is
// shown once: only its hash goes into the configuration.
func newKey(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return usageError{errors.New("new-key: takes no arguments")}
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("new-key: %w", err)
	}
	key := "tg_" + base64.RawURLEncoding.EncodeToString(b[:])
	_, err := fmt.Fprintf(stdout, "key: %s\nsha256: %q\n", key, proxy.HashKey(key))
	return err
}

// check is `tradergate check -config FILE`: the file loaded as start-up
// and SIGHUP load it, every problem printed with its field and line, the
// variables it names printed as set or unset (proxy.Check).
func check(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("tradergate check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration file to check (required)")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if *path == "" || fs.NArg() > 0 {
		fs.Usage()
		return usageError{errors.New("check: give one -config FILE and nothing else")}
	}
	data, err := os.ReadFile(*path)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	r := proxy.Check(data, getenv)
	if err := r.Write(stdout, *path); err != nil {
		return err
	}
	if len(r.Problems) > 0 {
		return fmt.Errorf("check: %s does not load", *path)
	}
	return nil
}

// usageError is a command line that cannot run: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// exitCode is the exit status for run's error: 2 for a usage error, else 1.
func exitCode(err error) int {
	if errors.As(err, new(usageError)) {
		return 2
	}
	return 1
}

// Main runs the edge; it is a type so that tests can run it whole.
type Main struct {
	ConfigPath  string
	Demo        bool
	Listen      string // overrides server.listen
	AdminListen string // overrides admin.listen
	Stdout      io.Writer
	// LogOutput receives the JSON log lines at log.level; nil: os.Stderr.
	// Ignored when Logger is set.
	LogOutput io.Writer
	Logger    *slog.Logger
	Getenv    func(string) string
	// Ready, when set, is called with the listen address once serving.
	Ready func(addr string)

	level      slog.LevelVar // log.level, reloaded on SIGHUP
	configHash string        // of the configuration file last read
	demo       *demoHost
}

// Run loads the configuration, builds the edge and serves until ctx ends;
// SIGHUP reloads the configuration while it serves.
func (m *Main) Run(ctx context.Context) error {
	if m.Demo {
		var err error
		if m.demo, err = startDemo(); err != nil {
			return err
		}
		defer m.demo.close()
	}
	cfg, err := m.load()
	if err != nil {
		return err
	}
	// Listening comes first so that the demo's banner, which names the
	// address, is printed before the edge's first log line.
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	if m.demo != nil {
		m.demo.printCurls(m.Stdout, addr)
	}
	m.level.Set(cfg.Log.SlogLevel())
	if m.Logger == nil {
		out := m.LogOutput
		if out == nil {
			out = os.Stderr
		}
		m.Logger = newLogger(out, &m.level)
	}
	setMemoryLimit(cfg, m.Logger)
	// go-redis logs dial failures through a process-wide logger; the
	// limiter already reports store outages (rate-limited), so these are
	// debug lines.
	redis.SetLogger(redisLog{m.Logger})

	srv, err := proxy.New(cfg, proxy.Options{Logger: m.Logger, AccessLog: cfg.Log.AccessLog(), Getenv: m.Getenv,
		ConfigHash: m.configHash})
	if err != nil {
		return err
	}
	defer srv.Close()
	m.Logger.Info("serving", "pid", os.Getpid(), "addr", addr, "admin", cfg.Admin.Listen, "tls", cfg.Server.TLS.Mode,
		"upstream", cfg.Upstream.BaseURL, "config", m.configName(), "config_hash", m.configHash, "demo", m.Demo)
	if m.demo != nil && cfg.Admin.Listen != "off" {
		go m.printAdmin(ctx, srv)
	}
	stopHangup := onHangup(m.Logger, func() error { return m.reload(srv) })
	defer stopHangup()
	if m.Ready != nil {
		m.Ready(addr)
	}
	return srv.Serve(ctx, ln)
}

// newLogger is the edge's JSON log at level. Durations are written as the
// configuration spells them ("50ms"), not as nanoseconds.
func newLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindDuration {
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		}}))
}

// setMemoryLimit sets the process's Go memory limit: GOMEMLIMIT from the
// environment if given; else server.memory_limit (by default sized from
// cache.max_bytes), capped at 90% of a container's memory limit. Without a
// limit Go lets the heap grow to twice what is live, and the cache is most
// of what is live.
func setMemoryLimit(cfg *proxy.Config, log *slog.Logger) {
	want := uint64(cfg.MemoryLimit())
	provider := func() (uint64, error) {
		limit := want
		if c, err := memlimit.FromCgroup(); err == nil && (limit == 0 || c/10*9 < limit) {
			limit = c / 10 * 9
		}
		if limit == 0 {
			return 0, memlimit.ErrNoLimit
		}
		return limit, nil
	}
	limit, err := memlimit.Set(memlimit.WithProvider(provider), memlimit.WithRatio(1), memlimit.WithLogger(log))
	if err != nil {
		log.Warn("memory limit not set", "err", err)
		return
	}
	log.Info("memory limit", "bytes", limit, "gomemlimit_env", os.Getenv("GOMEMLIMIT") != "")
}

// load reads, parses and validates the configuration, with the flags'
// overrides and the demo's patch applied: the same steps at start and on
// every reload.
func (m *Main) load() (*proxy.Config, error) {
	data := embeddedConfig
	if m.ConfigPath != "" {
		var err error
		if data, err = os.ReadFile(m.ConfigPath); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
	}
	sum := sha256.Sum256(data)
	m.configHash = hex.EncodeToString(sum[:6])
	cfg, err := proxy.ParseConfig(data)
	if err != nil {
		return nil, configError(m.configName(), err)
	}
	if m.Listen != "" {
		cfg.Server.Listen = m.Listen
	}
	if m.AdminListen != "" {
		cfg.Admin.Listen = m.AdminListen
	}
	getenv := m.Getenv
	if m.demo != nil {
		getenv = m.demo.patch(cfg, getenv)
	}
	if err := cfg.Validate(getenv); err != nil {
		return nil, configError(m.configName(), err)
	}
	return cfg, nil
}

// configError is the error of a file that does not load: its one problem
// on the line, or its count and then each problem on a line of its own.
func configError(name string, err error) error {
	var list configerr.List
	if errors.As(err, &list) && len(list) > 1 {
		return fmt.Errorf("config %s: %d problems:\n\t%s", name, len(list), strings.ReplaceAll(list.Error(), "\n", "\n\t"))
	}
	return fmt.Errorf("config %s: %w", name, err)
}

// reload is SIGHUP: the configuration (keys, plans, cache policy, breaker
// settings, log level) and the TLS certificate files, or nothing at all
// when the new configuration does not validate. Settings fixed at start
// that differ are named in a warning (Server.Reload).
func (m *Main) reload(srv *proxy.Server) error {
	cfg, err := m.load()
	if err != nil {
		srv.ReloadFailed(err)
		return err
	}
	if err := srv.Reload(cfg); err != nil {
		return err
	}
	m.level.Set(cfg.Log.SlogLevel())
	return srv.ReloadCertificates()
}

// onHangup calls reload on every SIGHUP until stop is called. A reload that
// fails is logged, naming the field at fault, and the edge serves on with
// what it had.
func onHangup(log *slog.Logger, reload func() error) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-hup:
				if err := reload(); err != nil {
					log.Error("reload on SIGHUP failed; serving on with what was loaded before", "err", err)
				}
			case <-quit:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(quit)
		<-done
	}
}

func (m *Main) configName() string {
	if m.ConfigPath == "" {
		return "(embedded config.yaml)"
	}
	return m.ConfigPath
}

// demoHost is the simulated legacy host of -demo, on loopback.
type demoHost struct {
	sim       *legacysim.Sim
	srv       *http.Server
	url       string
	upKey     string
	clientKey string
}

// startDemo starts legacysim in-process with random keys: no key may ship
// in config.yaml.
func startDemo() (*demoHost, error) {
	d := &demoHost{upKey: randomKey("sim"), clientKey: randomKey("tg_demo")}
	// Live: the data keeps growing (new trades, order book events) while
	// the demo runs, so its first pages change as a real host's do.
	d.sim = legacysim.New(legacysim.Config{Seed: 1, Key: d.upKey, Live: &legacysim.Live{}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: listen: %w", err)
	}
	d.srv = &http.Server{Handler: d.sim, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = d.srv.Serve(ln) }()
	d.url = "http://" + ln.Addr().String() + "/open-api"
	return d, nil
}

// patch points cfg at the simulated host (its base URL and the edge's key
// for it, through the returned getenv), serves the legacy paths, and adds
// the demo client key on the "pro" plan, or the first plan there is.
func (d *demoHost) patch(cfg *proxy.Config, getenv func(string) string) func(string) string {
	cfg.Upstream.BaseURL = d.url
	// The demo prints a working key: it answers this machine only.
	cfg.Server.Listen = loopbackOnly(cfg.Server.Listen)
	if cfg.Admin.Listen != "off" {
		cfg.Admin.Listen = loopbackOnly(cfg.Admin.Listen)
	}
	// The legacy paths too, so that a legacy client's view can be tried;
	// a file that sets no deprecation date gets config.yaml's.
	cfg.Legacy.Enabled = true
	if cfg.Legacy.Deprecation == "" {
		cfg.Legacy.Deprecation = "2026-12-01T00:00:00Z"
	}
	plans := make([]string, 0, len(cfg.Plans))
	for name := range cfg.Plans {
		plans = append(plans, name)
	}
	slices.Sort(plans)
	plan := "pro"
	if _, ok := cfg.Plans[plan]; !ok && len(plans) > 0 {
		plan = plans[0]
	}
	cfg.Keys = append(cfg.Keys, proxy.KeyConfig{ID: "demo", SHA256: proxy.HashKey(d.clientKey), Plan: plan, Routes: []string{"*"}})
	keyEnv := cfg.Upstream.KeyEnv
	return func(name string) string {
		if name == keyEnv {
			return d.upKey
		}
		return getenv(name)
	}
}

func (d *demoHost) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = d.srv.Shutdown(ctx)
}

// printAdmin prints the admin listener's address once Serve has opened it
// (its port may be chosen by the system), or nothing if ctx ends first.
func (m *Main) printAdmin(ctx context.Context, srv *proxy.Server) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for srv.AdminAddr() == "" {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	fmt.Fprintf(m.Stdout, "Admin listener (status page, metrics): http://%s/status\n\n", srv.AdminAddr())
}

// loopbackOnly is addr with its host made 127.0.0.1 when it names every
// interface ("", 0.0.0.0, ::): for a listener that must answer this
// machine only, and for a URL that reaches a listener on every interface.
func loopbackOnly(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr // Validate names the problem
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

// printCurls prints ready-to-paste requests for every endpoint.
func (d *demoHost) printCurls(w io.Writer, addr string) {
	base := "http://" + loopbackOnly(addr)
	wallet := d.sim.Wallets()[0]
	market := d.sim.Markets()[0]
	var signer string
	for s, wl := range d.sim.Signers() {
		if wl == wallet {
			signer = s
		}
	}
	paths := []string{
		"/v1/orderbook/events?tokenId=" + url.QueryEscape(market.Tokens[0]) + "&eventType=book&order=desc&limit=1",
		"/v1/trader/" + wallet + "/activity?limit=5",
		"/v1/trader/" + wallet + "/deposits-withdrawals",
		"/v1/trader/" + wallet + "/combo-positions/closed",
		"/v1/trader/" + wallet + "/positions/closed",
		"/v1/trader/" + wallet + "/positions/open",
		"/v1/tx/" + d.sim.TradeTxs()[0],
		"/v1/tx/" + d.sim.ComboTxs()[0],
		"/v1/trader/wallet-address/" + signer,
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "\ntradergate demo: edge on %s, simulated legacy host in-process.\n", base)
	// go run starts the edge as a child: a signal to go run's own process
	// would end the wrapper and leave the edge running, so the command
	// names the edge's.
	pid := os.Getpid()
	fmt.Fprintf(bw, "Edge process id %d; reload its configuration with: kill -HUP %d\n", pid, pid)
	fmt.Fprintf(bw, "Demo API key (valid for this run only): %s\n\nTry:\n", d.clientKey)
	for _, p := range paths {
		fmt.Fprintf(bw, "  curl -s -H 'Authorization: Bearer %s' '%s%s'\n", d.clientKey, base, p)
	}
	fmt.Fprintf(bw, "\nA legacy client (variant B, with its Deprecation and Link headers):\n")
	fmt.Fprintf(bw, "  curl -si -H 'Authorization: Bearer %s' '%s/open-api/v1/trader/%s/activity?limit=5'\n", d.clientKey, base, wallet)
	fmt.Fprintln(bw)
	_ = bw.Flush()
}

// redisLog sends go-redis's own log lines to slog.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.Log(ctx, slog.LevelDebug, "redis: "+fmt.Sprintf(format, v...))
}

func randomKey(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}
