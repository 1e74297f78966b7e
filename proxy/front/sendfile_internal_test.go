//go:build linux

package front

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// unsent is how many bytes conn's socket holds that it has not sent
// (TCP_INFO's notsent_bytes).
func unsent(t *testing.T, conn *frontConn) int {
	t.Helper()
	rc, err := conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	return int(info.Notsent_bytes)
}

func pageFileOf(t *testing.T, b []byte) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "page")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// TestFileBodySends: the file goes straight to the socket, past fasthttp's
// writer, at explicit offsets (the file's own offset never moves), also
// when the client reads slowly and the socket fills; a file closed before
// the answer could take it is sent from the heap through the writer.
func TestFileBodySends(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 4<<16) // 4 MiB: fills the socket
	f := pageFileOf(t, body)
	server, client := frontPair(t)
	got := make(chan []byte)
	go func() {
		// A slow reader, the condition under test: the sender meets a
		// full socket. Nothing waits on this pause; the answers are
		// checked whenever it ends.
		time.Sleep(50 * time.Millisecond)
		b := make([]byte, 2*len(body))
		_, _ = io.ReadFull(client, b)
		got <- b
	}()
	var w bytes.Buffer
	for i := range 2 {
		b := newFileBody(f, server, body)
		n, err := b.WriteTo(&w)
		if err != nil || n != int64(len(body)) || w.Len() != 0 {
			t.Fatalf("answer %d: sent %d (%v), %d bytes through the writer", i, n, err, w.Len())
		}
		_ = b.Close()
	}
	if b := <-got; !bytes.Equal(b[:len(body)], body) || !bytes.Equal(b[len(body):], body) {
		t.Fatal("the client read other bytes than the page, twice")
	}
	if off, _ := f.Seek(0, io.SeekCurrent); off != 0 {
		t.Errorf("the file's offset moved to %d", off)
	}

	_ = f.Close()
	n, err := newFileBody(f, server, body).WriteTo(&w)
	if err != nil || n != int64(len(body)) || !bytes.Equal(w.Bytes(), body) {
		t.Errorf("closed file: %d bytes (%v), %d through the writer; want the heap's", n, err, w.Len())
	}
}

// TestFileBodyHoldsHeader: the header block written after newFileBody is
// held back for the page, and nothing is left held once the page is sent,
// sent from the heap, or dropped; a body closed before its header block
// was written leaves the next write alone.
func TestFileBodyHoldsHeader(t *testing.T) {
	header := []byte("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
	body := bytes.Repeat([]byte("p"), 1000)
	f := pageFileOf(t, body)
	server, client := frontPair(t)
	answer := append(append([]byte{}, header...), body...)
	read := func(what string, want []byte) {
		t.Helper()
		_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
		got := make([]byte, len(want))
		if _, err := io.ReadFull(client, got); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: the client read %q (%v)", what, got, err)
		}
	}
	// hold writes the header block as fasthttp's flush does and checks
	// that the socket keeps it. The kernel's probe timer sends a held
	// block after about 200 ms, so a check that came 100 ms or more
	// after the write (a loaded machine) proves nothing and is skipped.
	hold := func(what string) {
		t.Helper()
		start := time.Now()
		if _, err := server.Write(header); err != nil {
			t.Fatal(err)
		}
		if n := unsent(t, server); n != len(header) && time.Since(start) < 100*time.Millisecond {
			t.Fatalf("%s: %d of the header block's %d bytes held back", what, n, len(header))
		}
	}

	var w bytes.Buffer
	b := newFileBody(f, server, body)
	hold("page file")
	if n, err := b.WriteTo(&w); err != nil || n != int64(len(body)) || w.Len() != 0 {
		t.Fatalf("page file: sent %d (%v), %d bytes through the writer", n, err, w.Len())
	}
	if n := unsent(t, server); n != 0 {
		t.Fatalf("page file: %d bytes still held after the page", n)
	}
	_ = b.Close()
	read("page file", answer)

	// Dropped after its header block: Close pushes the block out.
	b = newFileBody(f, server, body)
	hold("dropped")
	_ = b.Close()
	if n := unsent(t, server); n != 0 {
		t.Fatalf("dropped: %d bytes still held after Close", n)
	}
	read("dropped", header)

	// Closed before its header block: the next write is not held.
	_ = newFileBody(f, server, body).Close()
	if _, err := server.Write(header); err != nil {
		t.Fatal(err)
	}
	if n := unsent(t, server); n != 0 {
		t.Fatalf("a write after a body closed early: %d bytes held", n)
	}
	read("closed early", header)

	// From the heap (the file closed): the writer's bytes go out in a
	// plain write, which pushes the held block with them.
	_ = f.Close()
	b = newFileBody(f, server, body)
	hold("heap")
	if n, err := b.WriteTo(&w); err != nil || n != int64(len(body)) {
		t.Fatalf("heap: %d bytes (%v)", n, err)
	}
	_ = b.Close()
	if _, err := server.Write(w.Bytes()); err != nil {
		t.Fatal(err)
	}
	if n := unsent(t, server); n != 0 {
		t.Fatalf("heap: %d bytes still held after the page", n)
	}
	read("heap", answer)
}

// TestFileBodyDeadline: a client that stops reading is cut off by the
// connection's write deadline, as an answer from the heap would be.
func TestFileBodyDeadline(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 16<<20)
	f := pageFileOf(t, body)
	server, _ := frontPair(t)
	_ = server.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	b := newFileBody(f, server, body)
	n, err := b.WriteTo(io.Discard)
	if !errors.Is(err, os.ErrDeadlineExceeded) || n >= int64(len(body)) {
		t.Fatalf("sent %d of %d: %v, want the deadline", n, len(body), err)
	}
	if err := b.Close(); err != nil || server.more {
		t.Errorf("Close after the deadline: %v, next write held %v", err, server.more)
	}
}
