package front

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"tradergate/internal/testkit"
)

// lingerPair is frontPair with a lingering close asked of the server's
// end, counted in stats.
func lingerPair(t *testing.T, stats *lingerStats) (*frontConn, *net.TCPConn) {
	t.Helper()
	srv, client := frontPair(t)
	srv.linger.stats = stats
	lingerOnClose(srv)
	return srv, client.(*net.TCPConn)
}

// ends reads stats as counts by end.
func ends(s *lingerStats) [numLingerEnds]uint64 {
	var got [numLingerEnds]uint64
	for i := range got {
		got[i] = s.ends[i].Load()
	}
	return got
}

// A lingering close ends each way it can, is counted by how, and bounds
// what the client can make it wait for or read.
func TestLingeringCloseEnds(t *testing.T) {
	t.Run("client closes", func(t *testing.T) {
		var s lingerStats
		srv, client := lingerPair(t, &s)
		_, _ = client.Write(make([]byte, 64<<10)) // unread by the server
		go func() {
			// The client reads the server's FIN, then closes.
			_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := client.Read(make([]byte, 1)); err != io.EOF {
				t.Errorf("the client read %v, want the server's FIN (EOF)", err)
			}
			client.Close()
		}()
		if err := srv.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if got := ends(&s); got != [numLingerEnds]uint64{lingerEOF: 1} {
			t.Errorf("ends %v, want one client_closed", got)
		}
	})
	t.Run("past the bytes", func(t *testing.T) {
		var s lingerStats
		srv, client := lingerPair(t, &s)
		go func() {
			// A client sending without end: its writes fail once the
			// server has closed.
			b := make([]byte, 64<<10)
			for {
				if _, err := client.Write(b); err != nil {
					return
				}
			}
		}()
		_ = srv.Close()
		if got := ends(&s); got != [numLingerEnds]uint64{lingerBytesOut: 1} {
			t.Errorf("ends %v, want one bytes", got)
		}
	})
	t.Run("past the time", func(t *testing.T) {
		if testing.Short() {
			t.Skip("waits for lingerTime")
		}
		var s lingerStats
		srv, _ := lingerPair(t, &s) // a client that neither sends nor closes
		start := time.Now()
		_ = srv.Close()
		if waited := time.Since(start); waited < lingerTime {
			t.Errorf("closed after %v, before lingerTime", waited)
		}
		if got := ends(&s); got != [numLingerEnds]uint64{lingerTimeout: 1} {
			t.Errorf("ends %v, want one timeout", got)
		}
	})
	t.Run("cut", func(t *testing.T) {
		// The drain's cut closes every connection from its own
		// goroutine: a lingering one among them closes at once.
		var s lingerStats
		srv, _ := lingerPair(t, &s)
		done := make(chan struct{})
		go func() {
			_ = srv.Close()
			close(done)
		}()
		// Wait until the linger has taken its turn, then cut.
		for srv.linger.wanted.Load() {
			time.Sleep(time.Millisecond)
		}
		_ = srv.Close()
		select {
		case <-done:
		case <-time.After(lingerTime / 2):
			t.Fatal("a cut connection went on lingering")
		}
		if got := ends(&s); got != [numLingerEnds]uint64{lingerError: 1} {
			t.Errorf("ends %v, want one error", got)
		}
	})
	t.Run("not asked", func(t *testing.T) {
		// A connection the client ends, or one closed idle, closes as it
		// is: no wait, no count.
		var s lingerStats
		srv, client := lingerPair(t, &s)
		srv.linger.wanted.Store(false)
		_ = srv.Close()
		_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := client.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("the client read %v, want EOF", err)
		}
		if got := ends(&s); got != [numLingerEnds]uint64{} {
			t.Errorf("ends %v, want none", got)
		}
	})
}

// Over TLS the lingering close sends close_notify and the TCP FIN, then
// reads the client's records until it closes.
func TestLingeringCloseTLS(t *testing.T) {
	pair := testkit.SelfSigned(t, "linger", time.Now().Add(time.Hour))
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var s lingerStats
	ln := frontListener{Listener: tls.NewListener(plainHTTPListener{raw}, &tls.Config{Certificates: []tls.Certificate{cert}}), lingers: &s}
	clientDone := make(chan error, 1)
	go func() {
		c, err := tls.Dial("tcp", raw.Addr().String(), &tls.Config{RootCAs: pair.Pool(), ServerName: "127.0.0.1"})
		if err != nil {
			clientDone <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		// Still sending after the server's answer, then reading to its end.
		if _, err := c.Write(make([]byte, 256<<10)); err != nil {
			clientDone <- err
			return
		}
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			clientDone <- errors.Join(errors.New("want close_notify (EOF)"), err)
			return
		}
		clientDone <- nil
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	fc := c.(*frontTLSConn)
	if err := fc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.Read(make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	lingerOnClose(fc)
	_ = fc.Close()
	if err := <-clientDone; err != nil {
		t.Fatalf("client: %v", err)
	}
	if got := ends(&s); got != [numLingerEnds]uint64{lingerEOF: 1} {
		t.Errorf("ends %v, want one client_closed", got)
	}
}
