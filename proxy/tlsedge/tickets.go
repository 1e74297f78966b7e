package tlsedge

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"tradergate/cache/configerr"
)

// TLS session resumption. A client that was here before resumes its
// session from a ticket (RFC 8446 section 2.2) instead of a full
// handshake: no certificate sent, no signature made.
//
// Without server.tls.session_ticket_key_file, crypto/tls makes the ticket
// keys itself, in memory: a new one every day, each accepted for a week
// (its automatic rotation, Config.SessionTicketKey left zero). They belong
// to the edge's one tls.Config, which lives as long as the process, so a
// SIGHUP keeps them; a restart, or another replica, starts a full
// handshake.
//
// With the file, every replica given the same file resumes the others'
// sessions: its first key encrypts new tickets, all of them decrypt. The
// operator rotates by writing a new key first, keeping the old ones after
// it for a while, and sending SIGHUP; a file that does not load is an
// error and the keys in use stay. The keys are never logged, nor quoted
// in an error.

// maxTicketKeys bounds the keys of the file: enough for a rotation
// every hour kept for a day and more.
const maxTicketKeys = 32

// ticketKeys is the key file's side of the edge.
type ticketKeys struct {
	// cfg is the client listener's tls.Config, once Start made it.
	cfg atomic.Pointer[tls.Config]
}

// load reads the key file, if there is one: nil keys without.
func (t *ticketKeys) load(e *Edge) ([][32]byte, error) {
	file := e.cfg.SessionTicketKeyFile
	if file == "" {
		return nil, nil
	}
	keys, err := loadTicketKeys(file)
	if err != nil {
		return nil, err
	}
	attrs := []any{"session_ticket_key_file", file, "keys", len(keys)}
	if fi, err := os.Stat(file); err == nil && fi.Mode().Perm()&0o077 != 0 {
		e.log.Warn("tls: the session ticket key file can be read by others than its owner", append(attrs, "mode", fi.Mode().Perm().String())...)
	}
	e.log.Info("tls: session ticket keys loaded", attrs...)
	return keys, nil
}

// start gives cfg, the client listener's configuration, the file's keys
// (nil: crypto/tls's own) and keeps it for reload.
func (t *ticketKeys) start(cfg *tls.Config, keys [][32]byte) {
	if keys != nil {
		cfg.SetSessionTicketKeys(keys)
	}
	t.cfg.Store(cfg)
}

// reload reads the key file again and gives its keys to the handshakes
// from now on; before Start it only checks the file (tradergate check).
// A file that does not load changes nothing.
func (t *ticketKeys) reload(e *Edge) error {
	keys, err := t.load(e)
	if err != nil || keys == nil {
		return err
	}
	if cfg := t.cfg.Load(); cfg != nil {
		cfg.SetSessionTicketKeys(keys)
	}
	return nil
}

// loadTicketKeys reads server.tls.session_ticket_key_file: one key a line,
// the standard base64 of 32 random bytes (`openssl rand -base64 32`);
// blank lines and lines starting with # are skipped. The first key
// encrypts.
func loadTicketKeys(file string) ([][32]byte, error) {
	const field = "server.tls.session_ticket_key_file"
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, configerr.Wrap(field, "", err)
	}
	var keys [][32]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		// Only the line's number: its text is a key, or part of one.
		raw, err := base64.StdEncoding.DecodeString(text)
		if err != nil || len(raw) != 32 {
			return nil, &configerr.FieldError{Path: field, Msg: fmt.Sprintf("%s: line %d: a key must be the base64 of 32 bytes", file, line), Hint: "make one with openssl rand -base64 32"}
		}
		var k [32]byte
		copy(k[:], raw)
		if k == ([32]byte{}) {
			return nil, &configerr.FieldError{Path: field, Msg: fmt.Sprintf("%s: line %d: a key of zeros", file, line)}
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, configerr.Wrap(field, file, err)
	}
	switch {
	case len(keys) == 0:
		return nil, configerr.Wrap(field, file, errNoTicketKey)
	case len(keys) > maxTicketKeys:
		return nil, &configerr.FieldError{Path: field, Msg: fmt.Sprintf("%s: %d keys, at most %d", file, len(keys), maxTicketKeys)}
	}
	return keys, nil
}

var errNoTicketKey = errors.New("no key: one a line, the base64 of 32 bytes (openssl rand -base64 32)")

// TicketKeys reads server.tls.session_ticket_key_file as start-up does,
// for `tradergate check`; nil, nil when the setting is empty.
func (c *Config) TicketKeys() ([][32]byte, error) {
	if c.SessionTicketKeyFile == "" {
		return nil, nil
	}
	return loadTicketKeys(c.SessionTicketKeyFile)
}
