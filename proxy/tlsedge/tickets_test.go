package tlsedge

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tradergate/internal/testkit"
)

const testName = "edge.test"

// handshaker is an Edge started in mode files on a loopback listener,
// with a server that completes the handshake of every connection, writes
// one byte (which carries the TLS 1.3 session tickets to the client) and
// closes.
type handshaker struct {
	edge *Edge
	addr string
}

func startHandshaker(t *testing.T, cfg Config) *handshaker {
	t.Helper()
	noPlain := ""
	cfg.Mode, cfg.HTTPListen = ModeFiles, &noPlain
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	logs := &testkit.LogBuffer{}
	e := New(cfg, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.Start(ln, &http.Server{})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	tln := tls.NewListener(ln, st.TLS)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := tln.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if c.(*tls.Conn).Handshake() == nil {
				_, _ = c.Write([]byte{1})
			}
			c.Close()
		}
	}()
	t.Cleanup(func() {
		tln.Close()
		<-done
		st.Close()
		if strings.Contains(logs.String(), keyText(t, cfg.SessionTicketKeyFile)) {
			t.Errorf("a ticket key is in the log:\n%s", logs)
		}
	})
	return &handshaker{edge: e, addr: ln.Addr().String()}
}

// keyText is the key file's text, or a string no log holds.
func keyText(t *testing.T, file string) string {
	if file == "" {
		return "\x00none"
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return first
}

// dial makes a handshake with the client's session cache and reports
// whether it resumed a session, and which key the certificate had.
func dial(t *testing.T, addr string, cache tls.ClientSessionCache, cfg *tls.Config) (resumed bool, key x509.PublicKeyAlgorithm) {
	t.Helper()
	c := &tls.Config{InsecureSkipVerify: true, ServerName: testName, ClientSessionCache: cache}
	if cfg != nil {
		c = cfg.Clone()
		c.InsecureSkipVerify, c.ServerName, c.ClientSessionCache = true, testName, cache
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, c)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	// Reading takes in the tickets that follow the handshake.
	if _, err := io.ReadFull(conn, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	st := conn.ConnectionState()
	if len(st.PeerCertificates) > 0 {
		key = st.PeerCertificates[0].PublicKeyAlgorithm
	}
	return st.DidResume, key
}

// writePair writes an ECDSA self-signed pair for testName into dir.
func writePair(t *testing.T, dir, name string) (certFile, keyFile string) {
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	testkit.SelfSigned(t, name, time.Now().Add(24*time.Hour), testName).Write(t, certFile, keyFile)
	return certFile, keyFile
}

// writeTicketKeys writes keys into file, one a line.
func writeTicketKeys(t *testing.T, file string, keys ...string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newTicketKey(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// Without a key file, a session is resumed from crypto/tls's own keys,
// before and after a reload (what SIGHUP calls) with a new certificate.
func TestSessionResumedAcrossReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writePair(t, dir, "first")
	h := startHandshaker(t, Config{CertFile: certFile, KeyFile: keyFile})
	cache := tls.NewLRUClientSessionCache(8)
	if resumed, _ := dial(t, h.addr, cache, nil); resumed {
		t.Fatal("the first handshake resumed a session")
	}
	if resumed, _ := dial(t, h.addr, cache, nil); !resumed {
		t.Fatal("the second handshake did not resume the first's session")
	}
	writePair(t, dir, "first") // a renewed certificate in the same files
	if err := h.edge.ReloadCertificates(); err != nil {
		t.Fatal(err)
	}
	if resumed, _ := dial(t, h.addr, cache, nil); !resumed {
		t.Fatal("after the reload, the handshake did not resume the session")
	}
}

// Two edges given the same key file resume each other's sessions; after
// a rotation (a new key first, the old one after it, and a reload) the
// old tickets are still taken, and a ticket of a key no longer in the
// file is not.
func TestSessionTicketKeyFileSharedAndRotated(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "tickets")
	oldKey := newTicketKey(t)
	writeTicketKeys(t, keys, oldKey)
	certFile, keyFile := writePair(t, dir, "edge")
	cfg := Config{CertFile: certFile, KeyFile: keyFile, SessionTicketKeyFile: keys}
	a, b := startHandshaker(t, cfg), startHandshaker(t, cfg)

	cache := tls.NewLRUClientSessionCache(8)
	dial(t, a.addr, cache, nil)
	if resumed, _ := dial(t, b.addr, cache, nil); !resumed {
		t.Fatal("edge b did not resume a session of edge a, with the same key file")
	}

	// Rotation: a new key encrypts, the old one still decrypts.
	writeTicketKeys(t, keys, newTicketKey(t), oldKey)
	for _, h := range []*handshaker{a, b} {
		if err := h.edge.ReloadCertificates(); err != nil {
			t.Fatal(err)
		}
	}
	oldTicket := tls.NewLRUClientSessionCache(8)
	writeTicketKeys(t, filepath.Join(dir, "scratch"), oldKey) // for an edge of the old key alone, below
	if resumed, _ := dial(t, a.addr, cache, nil); !resumed {
		t.Fatal("after the rotation, a ticket of the old key was refused")
	}
	// That resumption got a ticket of the new key; b takes it too.
	if resumed, _ := dial(t, b.addr, cache, nil); !resumed {
		t.Fatal("after the rotation, edge b refused a ticket of the new key")
	}

	// The old key dropped: a ticket made with it alone is refused.
	c := startHandshaker(t, Config{CertFile: certFile, KeyFile: keyFile, SessionTicketKeyFile: filepath.Join(dir, "scratch")})
	dial(t, c.addr, oldTicket, nil) // a ticket of the old key
	writeTicketKeys(t, keys, newTicketKey(t))
	if err := a.edge.ReloadCertificates(); err != nil {
		t.Fatal(err)
	}
	if resumed, _ := dial(t, a.addr, oldTicket, nil); resumed {
		t.Fatal("a ticket of a key no longer in the file was taken")
	}
}

// A key file that does not load is refused with its field named, at start
// and on reload (where the keys in use stay), and never quoted.
func TestSessionTicketKeyFileRefused(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writePair(t, dir, "edge")
	good := newTicketKey(t)
	short := base64.StdEncoding.EncodeToString([]byte("sixteen bytes!!!"))
	for _, c := range []struct {
		name, text, want string
	}{
		{"empty", "", "no key"},
		{"comments only", "# keys go here\n\n", "no key"},
		{"short key", good + "\n" + short + "\n", "line 2: a key must be the base64 of 32 bytes"},
		{"not base64", "not a key at all, just words\n", "line 1: a key must be the base64 of 32 bytes"},
		{"zeros", base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n", "line 1: a key of zeros"},
		{"too many", strings.Repeat(good+"\n", maxTicketKeys+1), "33 keys, at most 32"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "tickets")
			if err := os.WriteFile(file, []byte(c.text), 0o600); err != nil {
				t.Fatal(err)
			}
			e := New(Config{Mode: ModeFiles, CertFile: certFile, KeyFile: keyFile, SessionTicketKeyFile: file}, Options{})
			e.cfg.ApplyDefaults()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			_, err = e.Start(ln, &http.Server{})
			if err == nil || !strings.Contains(err.Error(), "server.tls.session_ticket_key_file") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Start: %v, want server.tls.session_ticket_key_file ... %s", err, c.want)
			}
			if strings.Contains(err.Error(), good) || (c.name == "short key" && strings.Contains(err.Error(), short)) {
				t.Errorf("the error quotes a key: %v", err)
			}
		})
	}

	t.Run("missing", func(t *testing.T) {
		_, err := loadTicketKeys(filepath.Join(dir, "nothing-here"))
		if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "server.tls.session_ticket_key_file") {
			t.Fatalf("%v", err)
		}
	})

	t.Run("reload keeps the keys in use", func(t *testing.T) {
		keys := filepath.Join(t.TempDir(), "tickets")
		writeTicketKeys(t, keys, good)
		h := startHandshaker(t, Config{CertFile: certFile, KeyFile: keyFile, SessionTicketKeyFile: keys})
		cache := tls.NewLRUClientSessionCache(8)
		dial(t, h.addr, cache, nil)
		writeTicketKeys(t, keys, short)
		err := h.edge.ReloadCertificates()
		if err == nil || !strings.Contains(err.Error(), "server.tls.session_ticket_key_file") {
			t.Fatalf("reload: %v", err)
		}
		writeTicketKeys(t, keys, good) // for the log check of the cleanup
		if resumed, _ := dial(t, h.addr, cache, nil); !resumed {
			t.Fatal("after a refused reload, the keys in use were dropped")
		}
	})
}

// With an ECDSA pair and an RSA pair, a client that supports both gets
// the ECDSA certificate, whichever pair is first in the file; a client
// that supports only RSA gets the RSA one.
func TestECDSAPreferred(t *testing.T) {
	dir := t.TempDir()
	ecCert, ecKey := writePair(t, dir, "ecdsa")
	rsaCert, rsaKey := writeRSAPair(t, dir)
	for _, cfg := range []Config{
		{CertFile: ecCert, KeyFile: ecKey, SecondCertFile: rsaCert, SecondKeyFile: rsaKey},
		{CertFile: rsaCert, KeyFile: rsaKey, SecondCertFile: ecCert, SecondKeyFile: ecKey},
	} {
		h := startHandshaker(t, cfg)
		if _, key := dial(t, h.addr, nil, nil); key != x509.ECDSA {
			t.Errorf("cert_file %s: a client that supports both got %v", filepath.Base(cfg.CertFile), key)
		}
		onlyRSA := &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}}
		if _, key := dial(t, h.addr, nil, onlyRSA); key != x509.RSA {
			t.Errorf("cert_file %s: a client that supports only RSA got %v", filepath.Base(cfg.CertFile), key)
		}
		if n := len(h.edge.Certificates()); n != 2 {
			t.Errorf("Certificates lists %d, want 2", n)
		}
	}

	c := Config{Mode: ModeFiles, CertFile: ecCert, KeyFile: ecKey, SecondCertFile: rsaCert}
	c.ApplyDefaults()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "server.tls.second_cert_file") {
		t.Errorf("a second certificate without its key: %v", err)
	}
}

// writeRSAPair writes a self-signed RSA pair for testName into dir.
func writeRSAPair(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "rsa"},
		DNSNames:     []string{testName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "rsa.crt"), filepath.Join(dir, "rsa.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
