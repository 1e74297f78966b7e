package proxy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"tradergate/internal/testkit"
	"tradergate/proxy"
	"tradergate/proxy/config"
)

// Mode acme end to end against Pebble, Let's Encrypt's ACME test server
// Pebble is built from the Go module proxy at a pinned version
// with `go install`, outside this module so that its dependencies do not
// enter go.mod, and cached in the user cache folder across runs. Without a
// Go toolchain or the module proxy the tests skip, except under CI=1, where
// they fail.

const (
	pebbleModule  = "github.com/letsencrypt/pebble/v2"
	pebbleVersion = "v2.10.1"
)

// certmagicGoroutines are goroutines certmagic keeps at package level,
// beyond any Config or Cache we could stop, for TestMain's leak check: the
// internal rate limiter of each CA and account (kept for the life of the
// process, acmeclient.go), and the refresher of a released storage lock,
// which ends within 5s (filestorage.go).
var certmagicGoroutines = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/caddyserver/certmagic.(*RingBufferRateLimiter).loop"),
	goleak.IgnoreAnyFunction("github.com/caddyserver/certmagic.keepLockfileFresh"),
}

// pebbleFiles are the binary and, from the module's source, the test
// certificate of Pebble's own HTTPS listeners and its root.
type pebbleFiles struct {
	bin, cert, key, minica string
}

var installPebbleOnce = sync.OnceValues(installPebble)

// pebbleBinary returns Pebble's files, building the binary on first use.
func pebbleBinary(t *testing.T) pebbleFiles {
	t.Helper()
	f, err := installPebbleOnce()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("pebble %s: %v (CI is set: the ACME tests must run)", pebbleVersion, err)
		}
		t.Skipf("skipping the ACME end-to-end tests: pebble %s could not be built (%v); they run, and must pass, with CI=1", pebbleVersion, err)
	}
	return f
}

func installPebble() (pebbleFiles, error) {
	goBin, err := exec.LookPath("go") // go test puts its own toolchain first on PATH
	if err != nil {
		return pebbleFiles{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	work, err := os.MkdirTemp("", "pebble-build-")
	if err != nil {
		return pebbleFiles{}, err
	}
	defer os.RemoveAll(work)
	// Outside this module: none of its settings, no go.work, no change to
	// its go.mod. GOFLAGS may carry flags (-mod) that `go install pkg@v`
	// refuses.
	env := append(os.Environ(), "GOFLAGS=", "GOWORK=off", "GO111MODULE=on")
	run := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Dir, cmd.Env = work, env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return out, nil
	}

	// The module's source, for the certificates under test/certs.
	out, err := run("mod", "download", "-json", pebbleModule+"@"+pebbleVersion)
	if err != nil {
		return pebbleFiles{}, err
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return pebbleFiles{}, fmt.Errorf("go mod download: %v %s", err, mod.Error)
	}
	f := pebbleFiles{
		cert:   filepath.Join(mod.Dir, "test", "certs", "localhost", "cert.pem"),
		key:    filepath.Join(mod.Dir, "test", "certs", "localhost", "key.pem"),
		minica: filepath.Join(mod.Dir, "test", "certs", "pebble.minica.pem"),
	}

	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "tradergate-test", "pebble-"+pebbleVersion+"-"+runtime.GOOS+"-"+runtime.GOARCH)
	f.bin = filepath.Join(dir, "pebble")
	if fi, err := os.Stat(f.bin); err == nil && fi.Mode().IsRegular() {
		return f, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return pebbleFiles{}, err
	}
	// Installed into a private folder, then renamed into place, so that a
	// concurrent run never sees half a binary.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return pebbleFiles{}, err
	}
	defer os.RemoveAll(tmp)
	env = append(env, "GOBIN="+tmp)
	if _, err := run("install", pebbleModule+"/cmd/pebble@"+pebbleVersion); err != nil {
		return pebbleFiles{}, err
	}
	if err := os.Rename(filepath.Join(tmp, "pebble"), f.bin); err != nil {
		return pebbleFiles{}, err
	}
	return f, nil
}

// pebble is one running Pebble.
type pebble struct {
	files pebbleFiles
	dir   string         // the ACME directory URL
	roots *x509.CertPool // the root Pebble issues under: what clients trust
	proc  testkit.Process
	log   string // the path of its output
}

// pebbleSetup chooses how Pebble validates challenges.
type pebbleSetup struct {
	// validate makes Pebble really check the challenges, on httpPort
	// (HTTP-01) and tlsPort (TLS-ALPN-01) of the names asked for; without
	// it, Pebble's PEBBLE_VA_ALWAYS_VALID switch accepts every challenge.
	validate          bool
	httpPort, tlsPort string
}

func startPebble(t *testing.T, s pebbleSetup) *pebble {
	t.Helper()
	f := pebbleBinary(t)
	if s.httpPort == "" {
		s.httpPort = port(t, freeAddr(t))
	}
	if s.tlsPort == "" {
		s.tlsPort = port(t, freeAddr(t))
	}
	acme, mgmt := freeAddr(t), freeAddr(t)
	config := map[string]any{"pebble": map[string]any{
		"listenAddress":           acme,
		"managementListenAddress": mgmt,
		"certificate":             f.cert,
		"privateKey":              f.key,
		"httpPort":                mustAtoi(t, s.httpPort),
		"tlsPort":                 mustAtoi(t, s.tlsPort),
		"ocspResponderURL":        "",
		// No Retry-After: the client polls at its own quick pace.
		"retryAfter":   map[string]int{"authz": 0, "order": 0},
		"keyAlgorithm": "ecdsa",
		// One profile: Pebble picks a random one per order otherwise.
		"profiles": map[string]any{"default": map[string]any{"description": "tradergate tests", "validityPeriod": 90 * 24 * 3600}},
	}}
	data, _ := json.Marshal(config)
	cfgFile := filepath.Join(t.TempDir(), "pebble.json")
	if err := os.WriteFile(cfgFile, data, 0o600); err != nil {
		t.Fatal(err)
	}

	p := &pebble{files: f, dir: "https://" + acme + "/dir", log: filepath.Join(t.TempDir(), "pebble.log")}
	cmd := exec.Command(f.bin, "-config", cfgFile)
	cmd.Env = append(os.Environ(),
		"PEBBLE_VA_NOSLEEP=1",      // no random pauses before validating
		"PEBBLE_WFE_NONCEREJECT=0", // no deliberately rejected nonces
		"PEBBLE_VA_ALWAYS_VALID="+map[bool]string{true: "0", false: "1"}[s.validate],
	)
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("end of the pebble output:\n%s", testkit.Tail(p.log))
		}
	})

	// Ready once the management listener hands out the issuing root
	// (regenerated on every start) and the directory answers.
	minica, err := os.ReadFile(f.minica)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(minica)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	get := func(url string) ([]byte, error) {
		resp, err := c.Get(url)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("%s: %s", url, resp.Status)
		}
		return b, err
	}
	var root []byte
	ready := func(context.Context, int) bool {
		var err error
		if root, err = get("https://" + mgmt + "/roots/0"); err != nil {
			return false
		}
		_, err = get(p.dir)
		return err == nil
	}
	if err := p.proc.Start(cmd, p.log, 20*time.Second, ready); err != nil {
		t.Fatal(err)
	}
	p.roots = x509.NewCertPool()
	if !p.roots.AppendCertsFromPEM(root) {
		t.Fatalf("pebble's root is no PEM certificate: %q", root)
	}
	return p
}

// kill stops Pebble and waits for it; its state goes with it.
func (p *pebble) kill() {
	p.proc.Stop()
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// acmeBlock is the server.tls block of an edge that asks p for domain.
func acmeBlock(p *pebble, domain, storage, httpListen string) string {
	return "mode: acme\ndomains: [" + domain + "]\nemail: ops@tradergate.test\nca: " + strconv.Quote(p.dir) +
		"\nca_roots_file: " + strconv.Quote(p.files.minica) + "\nstorage: " + strconv.Quote(storage) +
		"\nhttp_listen: " + strconv.Quote(httpListen) + "\nhsts_max_age: 1h"
}

// TestACMEWithPebble is mode acme end to end: the edge obtains its
// certificate from Pebble, and a client that trusts only Pebble's root
// fetches /v1 pages over HTTPS with HTTP/2, getting the bodies the same
// edge gives over plain HTTP.
func TestACMEWithPebble(t *testing.T) {
	p := startPebble(t, pebbleSetup{})
	te := startTLSEdge(t, tlsSetup{yaml: acmeBlock(p, edgeName, t.TempDir(), freeAddr(t))})
	client := httpsClient(t, p.roots, edgeName)
	te.waitHTTPS(t, client)

	w := te.sim.Wallets()[0]
	for _, path := range []string{"/v1/tx/" + te.sim.TradeTxs()[0], "/v1/trader/" + w + "/activity?limit=5"} {
		resp, body := te.getTLS(t, client, path, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d: %s", path, resp.StatusCode, body)
		}
		checkTLS(t, resp, nil)
		leaf := resp.TLS.PeerCertificates[0]
		if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != edgeName || !strings.Contains(leaf.Issuer.CommonName, "Pebble") {
			t.Errorf("certificate for %v from %q, want %s from Pebble", leaf.DNSNames, leaf.Issuer.CommonName, edgeName)
		}
		if resp.Header.Get("Strict-Transport-Security") != "max-age=3600" {
			t.Errorf("%s: HSTS = %q", path, resp.Header.Get("Strict-Transport-Security"))
		}
		plainResp, plain := te.get(path)
		if !bytes.Equal(body, plain) || plainResp.Header.Get("Strict-Transport-Security") != "" {
			t.Errorf("%s: over TLS\n%s\nover plain HTTP (HSTS %q)\n%s", path, body, plainResp.Header.Get("Strict-Transport-Security"), plain)
		}
	}
	// certmagic's own lines arrive through the zap bridge.
	if logs := te.logs.String(); !strings.Contains(logs, `"msg":"certificate obtained successfully"`) || !strings.Contains(logs, `"logger":"certmagic`) {
		t.Errorf("certmagic's log lines are missing:\n%s", logs)
	}
}

// TestACMEChallengesAnsweredByTheEdge lets Pebble really validate, for
// "localhost": HTTP-01 on the plain-HTTP listener and TLS-ALPN-01 on the TLS
// listener must be answered by the edge's own servers. (Pebble dials the
// very addresses the edge holds, so no listener of certmagic's can answer.)
func TestACMEChallengesAnsweredByTheEdge(t *testing.T) {
	t.Run("TLS-ALPN-01 on the TLS port", func(t *testing.T) {
		// No plain-HTTP listener: TLS-ALPN-01 is the only challenge left.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := startPebble(t, pebbleSetup{validate: true, tlsPort: port(t, ln.Addr().String())})
		te := startTLSEdge(t, tlsSetup{yaml: acmeBlock(p, "localhost", t.TempDir(), ""), ln: ln})
		te.waitHTTPS(t, httpsClient(t, p.roots, "localhost"))
		if !strings.Contains(te.logs.String(), `"msg":"served key authentication certificate","logger":"certmagic","server_name":"localhost","challenge":"tls-alpn-01"`) {
			t.Error("the edge answered no tls-alpn-01 challenge")
		}
	})
	t.Run("HTTP-01 on the plain-HTTP port", func(t *testing.T) {
		// Pebble checks TLS-ALPN-01 on a port where nobody listens: should
		// the client try that first, it fails and falls back to HTTP-01.
		httpAddr := freeAddr(t)
		p := startPebble(t, pebbleSetup{validate: true, httpPort: port(t, httpAddr)})
		te := startTLSEdge(t, tlsSetup{yaml: acmeBlock(p, "localhost", t.TempDir(), httpAddr)})
		te.waitHTTPS(t, httpsClient(t, p.roots, "localhost"))
		if !strings.Contains(te.logs.String(), `"challenge":"http-01"`) {
			t.Error("the edge answered no http-01 challenge")
		}
	})
}

// TestACMEStartupFailsWithoutCertificate: when the CA cannot be reached and
// nothing is cached, start-up fails with a message naming the domain, the
// CA and the storage; while it tries, the TLS port completes no handshake
// and never answers plain HTTP with the API.
func TestACMEStartupFailsWithoutCertificate(t *testing.T) {
	// A "CA" that accepts connections and holds them: the edge is stuck
	// fetching the directory until the test lets go.
	ca, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ca.Accept()
			if err != nil {
				close(held)
				return
			}
			held <- c
		}
	}()
	var conns []net.Conn
	release := sync.OnceFunc(func() {
		ca.Close()
		for c := range held {
			conns = append(conns, c)
		}
		for _, c := range conns {
			c.Close()
		}
	})
	t.Cleanup(release)

	storage := t.TempDir()
	httpAddr := freeAddr(t)
	dir := "https://" + ca.Addr().String() + "/directory"
	te := startTLSEdge(t, tlsSetup{yaml: "mode: acme\ndomains: [" + edgeName + "]\nemail: ops@tradergate.test\nca: " + dir +
		"\nstorage: " + strconv.Quote(storage) + "\nhttp_listen: " + httpAddr})
	te.errExpected = true

	select {
	case c := <-held:
		held <- c // keep it for release
	case <-te.stopped:
		t.Fatalf("Serve returned before asking the CA: %v", te.err)
	case <-time.After(20 * time.Second):
		t.Fatal("the edge did not ask the CA within 20s")
	}
	// Obtaining: the TLS port completes no handshake...
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", te.addr, &tls.Config{ServerName: edgeName, InsecureSkipVerify: true})
	if err == nil {
		c.Close()
		t.Error("a TLS handshake completed without a certificate")
	}
	// ...and answers plain HTTP with a refusal, never with the API...
	resp, body := rawHTTP(t, te.addr, "GET /v1/tx/"+te.sim.TradeTxs()[0]+" HTTP/1.1\r\nHost: "+edgeName+"\r\nAuthorization: Bearer "+keyAll+"\r\n\r\n")
	if resp.StatusCode != 400 || strings.Contains(body, "status_code") {
		t.Errorf("plain HTTP on the TLS port while obtaining: %d %q", resp.StatusCode, body)
	}
	// ...while the plain-HTTP listener only redirects.
	if resp, _ := rawHTTP(t, httpAddr, "GET /v1/x HTTP/1.1\r\nHost: "+edgeName+"\r\nConnection: close\r\n\r\n"); resp.StatusCode != 308 {
		t.Errorf("plain-HTTP listener while obtaining: %d", resp.StatusCode)
	}

	release()
	err = te.wait(t)
	want := "tls: cannot obtain a certificate for " + edgeName + " from " + dir + ", and " + storage + " holds no valid one: "
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Serve = %v\nwant it to start with %q", err, want)
	}
	for _, addr := range []string{te.addr, httpAddr} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after the failed start", addr)
		}
	}
}

// TestACMECachedCertificateOutlivesCA: a certificate in storage that is due
// for renewal but still valid carries the edge through a CA outage; the
// failed renewal is logged, not fatal.
func TestACMECachedCertificateOutlivesCA(t *testing.T) {
	p := startPebble(t, pebbleSetup{})
	storage := t.TempDir()
	backdate := func(c *config.Config) { proxy.BackdateACMEOrders(c, 80*24*time.Hour) } // 10 of 90 days left
	first := startTLSEdge(t, tlsSetup{yaml: acmeBlock(p, edgeName, storage, ""), edit: backdate})
	client := httpsClient(t, p.roots, edgeName)
	first.waitHTTPS(t, client)
	resp, _ := first.getTLS(t, client, "/v1/tx/"+first.sim.TradeTxs()[0], nil)
	cached := resp.TLS.PeerCertificates[0]
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}
	p.kill()

	second := startTLSEdge(t, tlsSetup{yaml: acmeBlock(p, edgeName, storage, "")})
	client = httpsClient(t, p.roots, edgeName)
	second.waitHTTPS(t, client)
	resp, body := second.getTLS(t, client, "/v1/tx/"+second.sim.TradeTxs()[0], nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	checkTLS(t, resp, cached)
	// The cached certificate is served from the moment it is loaded, while
	// the renewal is still being tried; its failure is logged after.
	testkit.Eventually(t, "the failed renewal to be logged", func() bool {
		return strings.Contains(second.logs.String(), `"msg":"tls: renewing the certificate failed; serving the cached one until it expires, renewal is retried in the background","domain":"`+edgeName+`"`)
	})
	select {
	case <-second.stopped:
		t.Fatalf("Serve returned: %v", second.err)
	default:
	}
}
