package front

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"tradergate/internal/testkit"
)

// The raw calls read and write as net.Conn does: what was sent, all of a
// write larger than the socket's buffers (waiting for the reader), io.EOF
// at the peer's close, a timeout at the deadline and net.ErrClosed once
// closed, each error a *net.OpError as net.Conn's are.
func TestRawIOIsNetConnsReadAndWrite(t *testing.T) {
	client, server := testkit.TCPPair(t)
	raw := newRawIO(server)
	if raw == nil {
		t.Fatal("no raw I/O on a TCP connection")
	}

	// Read: what the client sent, then a timeout at the deadline.
	if _, err := client.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := raw.Read(buf)
	if err != nil || string(buf[:n]) != "GET / HTTP/1.1\r\n\r\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	server.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err = raw.Read(buf)
	var ne net.Error
	var oe *net.OpError
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	server.SetReadDeadline(time.Time{})

	// Write: 8 MiB, more than the socket's buffers hold, while the
	// client reads it slowly.
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<19)
	got := make(chan []byte)
	go func() {
		var b bytes.Buffer
		time.Sleep(20 * time.Millisecond)
		_, _ = io.CopyN(&b, client, int64(len(big)))
		got <- b.Bytes()
	}()
	if n, err := raw.Write(big); n != len(big) || err != nil {
		t.Fatalf("wrote %d of %d: %v", n, len(big), err)
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("the client read %d bytes, not what was written", len(b))
	}

	// Write past the write deadline to a client that reads nothing, on a
	// new pair whose buffers are fixed small: the pair above grew its
	// receive buffer as it read, and where the kernel lets it grow to
	// 32 MiB (net.ipv4.tcp_rmem) it would take all of big.
	client, server = testkit.TCPPair(t)
	if err := client.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	if err := server.(*net.TCPConn).SetWriteBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	raw = newRawIO(server)
	server.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := raw.Write(big); !errors.As(err, &ne) || !ne.Timeout() || n >= len(big) {
		t.Fatalf("write to a client that reads nothing: %d, %v, want a timeout", n, err)
	}

	// The peer's close is io.EOF, once what it sent is read (on a new
	// pair: the client above closes with unread bytes, which is a reset).
	client, server = testkit.TCPPair(t)
	raw = newRawIO(server)
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	client.Close()
	if n, err := raw.Read(buf); n != 1 || err != nil {
		t.Fatalf("read %d, %v before EOF", n, err)
	}
	if _, err := raw.Read(buf); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want io.EOF", err)
	}

	// Closed here: net.ErrClosed, as net.Conn's.
	server.Close()
	if _, err := raw.Read(buf); !errors.Is(err, net.ErrClosed) || !errors.As(err, &oe) {
		t.Fatalf("read on a closed connection: %v", err)
	}
	if _, err := raw.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write on a closed connection: %v", err)
	}
}

// A write to a peer gone away fails with the system's error (EPIPE or
// ECONNRESET) rather than hanging or reporting success.
func TestRawIOWriteToAClosedPeerFails(t *testing.T) {
	client, server := testkit.TCPPair(t)
	raw := newRawIO(server)
	client.(*net.TCPConn).SetLinger(0)
	client.Close() // an RST
	time.Sleep(20 * time.Millisecond)
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = raw.Write(make([]byte, 64<<10))
	}
	var se *os.SyscallError
	if !errors.As(err, &se) {
		t.Fatalf("writing to a reset connection: %v, want the system's error", err)
	}
}

// A read or write through the raw calls allocates nothing.
func TestRawIOAllocatesNothing(t *testing.T) {
	client, server := testkit.TCPPair(t)
	raw := newRawIO(server)
	buf := make([]byte, 64)
	msg := []byte("ping")
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := client.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Read(buf); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(client, buf[:len(msg)]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per read and write", allocs)
	}
}

// The front's listeners give their connections the raw calls: plain
// HTTP/1.1 through frontConn, TLS (HTTP/1.1 and HTTP/2) through sniffConn
// under crypto/tls.
func TestFrontConnectionsUseRawIO(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, l := range []net.Listener{frontListener{Listener: ln}, plainHTTPListener{ln}} {
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		var raw *rawIO
		switch c := c.(type) {
		case *frontConn:
			raw = c.raw
		case *sniffConn:
			raw = c.raw
		default:
			t.Fatalf("accepted a %T", c)
		}
		if raw == nil {
			t.Errorf("%T reads and writes through net.Conn", c)
		}
		c.Close()
		client.Close()
	}
}

// Writes at once from several goroutines, as net.Conn allows, each arrive
// whole.
func TestRawIOWritesAtOnce(t *testing.T) {
	client, server := testkit.TCPPair(t)
	raw := newRawIO(server)
	const writers, each = 8, 200
	msg := bytes.Repeat([]byte("w"), 1000)
	done := make(chan int64)
	go func() {
		n, _ := io.CopyN(io.Discard, client, writers*each*int64(len(msg)))
		done <- n
	}()
	errs := make(chan error, writers)
	for range writers {
		go func() {
			for range each {
				if _, err := raw.Write(msg); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := <-done; n != writers*each*int64(len(msg)) {
		t.Fatalf("the client read %d bytes", n)
	}
}
