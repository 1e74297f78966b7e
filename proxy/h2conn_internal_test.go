package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestH2ConnWritesInOrder writes small and large pieces through an h2conn
// and reads them on the other end of a pipe: every byte arrives, in order,
// whether it waited in the buffer or was written through.
func TestH2ConnWritesInOrder(t *testing.T) {
	server, client := net.Pipe()
	c := newH2Conn(server)
	var want bytes.Buffer
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(client)
		got <- b
	}()
	for i, size := range []int{9, 100, 4096, 40 << 10, 3, h2CoalesceBytes - 1, 1, 200 << 10, 17} {
		p := bytes.Repeat([]byte{byte('a' + i)}, size)
		want.Write(p)
		if n, err := c.Write(p); n != size || err != nil {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		if !bytes.Equal(b, want.Bytes()) {
			t.Fatalf("read %d bytes, want %d, or in another order", len(b), want.Len())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not get to the end")
	}
}

// TestH2ConnFlushesABurstOnItsOwn writes a small piece and nothing more:
// it reaches the peer without a Close or a further Write.
func TestH2ConnFlushesABurstOnItsOwn(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	c := newH2Conn(server)
	defer c.Close()
	if _, err := c.Write([]byte("frame")); err != nil {
		t.Fatal(err)
	}
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 5)
	if _, err := io.ReadFull(client, b); err != nil || string(b) != "frame" {
		t.Fatalf("read %q, %v", b, err)
	}
}

// TestH2ConnKeepsItsWriteError: once a write to the connection failed,
// every later Write fails too, rather than taking bytes that will never
// leave.
func TestH2ConnKeepsItsWriteError(t *testing.T) {
	server, client := net.Pipe()
	client.Close()
	c := newH2Conn(server)
	defer c.Close()
	if _, err := c.Write(make([]byte, 64<<10)); err == nil {
		t.Fatal("a write through to a closed pipe succeeded")
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("a later write: %v, want the first error", err)
	}
}
