package h2edge

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// blockFrames writes block as a HEADERS frame on stream 1, cut at cut
// (when inside it) into a HEADERS and a CONTINUATION frame.
func blockFrames(t testing.TB, block []byte, cut int) []byte {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	first, rest := block, []byte(nil)
	if cut > 0 && cut < len(block) {
		first, rest = block[:cut], block[cut:]
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndStream: true, EndHeaders: rest == nil}); err != nil {
		t.Fatal(err)
	}
	if rest != nil {
		if err := fr.WriteContinuation(1, true, rest); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// decodeBoth decodes the frames with x/net's framer (ReadMetaHeaders) and
// with headerBlock, and fails where the two disagree.
func decodeBoth(t testing.TB, frames []byte, max uint32) {
	theirs := http2.NewFramer(nil, bytes.NewReader(frames))
	theirs.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	theirs.MaxHeaderListSize = max
	f, theirErr := theirs.ReadFrame()

	ours := http2.NewFramer(nil, bytes.NewReader(frames))
	var b headerBlock
	b.init(hpack.NewDecoder(4096, nil), max)
	g, ourErr := ours.ReadFrame()
	if ourErr == nil {
		ourErr = b.read(ours, g.(*http2.HeadersFrame))
	}

	if kind(theirErr) != kind(ourErr) {
		t.Fatalf("x/net: %v; headerBlock: %v", theirErr, ourErr)
	}
	if theirErr != nil {
		return
	}
	mh := f.(*http2.MetaHeadersFrame)
	if mh.Truncated != b.truncated {
		t.Fatalf("truncated: x/net %v, headerBlock %v", mh.Truncated, b.truncated)
	}
	if !slices.Equal(mh.PseudoFields(), b.pseudo()) {
		t.Fatalf("pseudo-fields: x/net %v, headerBlock %v", mh.PseudoFields(), b.pseudo())
	}
	if !slices.Equal(mh.RegularFields(), b.regular()) && len(mh.RegularFields())+len(b.regular()) > 0 {
		t.Fatalf("fields: x/net %v, headerBlock %v", mh.RegularFields(), b.regular())
	}
}

// kind is what the read loop does with err: the stream reset with a
// code, the connection ended with one, or the framer's own error.
func kind(err error) string {
	var se http2.StreamError
	var ce http2.ConnectionError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &se):
		return "stream " + se.Code.String()
	case errors.As(err, &ce):
		return "connection " + http2.ErrCode(ce).String()
	}
	return "framer: " + err.Error()
}

func encode(fields ...string) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for i := 0; i+1 < len(fields); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return buf.Bytes()
}

var request = []string{":method", "GET", ":scheme", "https", ":authority", "edge.test", ":path", "/v1/activity?limit=20",
	"user-agent", "h2load", "accept-encoding", "gzip", "authorization", "Bearer k"}

// headerBlock decides every block as x/net's framer does: the same
// fields, the same truncation, the same error for the same fault.
func TestHeaderBlockDecodesAsXNet(t *testing.T) {
	long := string(bytes.Repeat([]byte("a"), 300))
	cases := map[string][]string{
		"request":               request,
		"value with a newline":  {":method", "GET", ":path", "/", "x-a", "b\nc"},
		"upper-case name":       {":method", "GET", ":path", "/", "X-A", "b"},
		"empty name":            {":method", "GET", ":path", "/", "", "b"},
		"pseudo after regular":  {":method", "GET", "x-a", "b", ":path", "/"},
		"duplicate pseudo":      {":method", "GET", ":path", "/", ":path", "/x"},
		"unknown pseudo":        {":method", "GET", ":foo", "/"},
		"status alone":          {":status", "200"},
		"request and response":  {":method", "GET", ":status", "200"},
		"trailer field":         {":method", "GET", ":path", "/", "trailer", "a, b, c"},
		"past the list size":    append(slices.Clone(request), "x-long", long, "x-after", "b"),
		"a long value and more": {":method", "GET", ":path", "/", "x-1", long, "x-2", long, "x-3", long, "x-4", long},
	}
	for name, fields := range cases {
		t.Run(name, func(t *testing.T) {
			block := encode(fields...)
			for _, max := range []uint32{0, 100, 400, 4096} {
				for _, cut := range []int{0, 1, len(block) / 2, len(block) - 1} {
					decodeBoth(t, blockFrames(t, block, cut), max)
				}
			}
		})
	}
	// Broken HPACK: a truncated block, an index past the tables.
	decodeBoth(t, blockFrames(t, encode(request...)[:5], 0), 0)
	decodeBoth(t, blockFrames(t, []byte{0xff, 0xff, 0x7f}, 0), 0)
	// A fragment far past the list size ends the connection.
	decodeBoth(t, blockFrames(t, encode(":method", "GET", "x-long", long+long+long), 1), 100)
}

func FuzzHeaderBlock(f *testing.F) {
	f.Add(encode(request...), uint16(0), uint32(0))
	f.Add(encode(request...), uint16(7), uint32(60))
	f.Add(encode(":method", "GET", "X-A", "b"), uint16(3), uint32(4096))
	f.Fuzz(func(t *testing.T, block []byte, cut uint16, max uint32) {
		if len(block) > 1<<14 {
			return
		}
		decodeBoth(t, blockFrames(t, block, int(cut)), max)
	})
}

// A repeated request's header block (its fields indexed in the
// connection's HPACK table) decodes with one allocation: the stream's
// copy of its fields.
func TestHeaderBlockAllocatesOnlyTheStreamsCopy(t *testing.T) {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	blocks := make([][]byte, 2)
	for i := range blocks {
		buf.Reset()
		for j := 0; j < len(request); j += 2 {
			enc.WriteField(hpack.HeaderField{Name: request[j], Value: request[j+1]})
		}
		blocks[i] = slices.Clone(buf.Bytes())
	}
	var b headerBlock
	b.init(hpack.NewDecoder(4096, nil), defaultMaxHeaderList)
	read := func(block []byte) *http2.HeadersFrame {
		fr := http2.NewFramer(nil, bytes.NewReader(blockFrames(t, block, 0)))
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		hf := f.(*http2.HeadersFrame)
		if err := b.read(fr, hf); err != nil {
			t.Fatal(err)
		}
		return hf
	}
	read(blocks[0]) // the table learns the fields
	hf := read(blocks[1])
	fr := http2.NewFramer(nil, nil) // not read: the block is one frame
	var fields []hpack.HeaderField
	allocs := testing.AllocsPerRun(100, func() {
		if err := b.read(fr, hf); err != nil {
			t.Fatal(err)
		}
		fields = b.regular()
		b.release()
	})
	if allocs != 1 {
		t.Errorf("a repeated request's block: %v allocations, want 1", allocs)
	}
	if len(fields) != 3 || fields[2].Value != "Bearer k" {
		t.Errorf("fields %v", fields)
	}
}
