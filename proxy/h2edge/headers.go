package h2edge

import (
	"errors"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// headerBlock decodes a request's header block: its HEADERS frame and
// the CONTINUATION frames after it. x/net's framer can do this itself
// (Framer.ReadMetaHeaders), but it allocates for every block a frame, a
// closure and the variables it captures, and the field list as it grows:
// nine of an HTTP/2 hit's seventeen allocations. This does the same
// checks with none but the stream's own copy of its fields. The rules
// are x/net's, kept as they were:
//
//   - a field value with a character RFC 9110 section 5.5 does not
//     allow, a field name that is not a lower-case token (RFC 9113
//     section 8.2.1), or a pseudo-field after a regular one (section
//     8.3) make the request malformed: the stream is reset, and a
//     CONTINUATION after such a field ends the connection;
//   - fields past Server.MaxHeaderListSize are dropped and the block
//     marked truncated (the edge answers it 431), and a fragment longer
//     than twice what is left of that budget ends the connection, so that
//     no more is decoded than a small multiple of the limit;
//   - pseudo-fields are only the request's, each once (section 8.3.1).
type headerBlock struct {
	dec *hpack.Decoder
	max uint32 // the header list's size limit

	// The block being decoded, or the last one: the fields as sent (the
	// pseudo-fields first), its budget left, and what was wrong with it.
	fields    []hpack.HeaderField
	npseudo   int
	truncated bool
	// The list's budget; a "trailer" field counts against a budget of its
	// own, as x/net counts it.
	headersLeft, trailersLeft uint32
	sawRegular                bool
	invalid                   error
}

// keptFields is the most fields a connection's block keeps room for
// between blocks: a request with more grows a list that goes once the
// fields are copied.
const keptFields = 32

var (
	errFieldValue         = errors.New("h2edge: invalid header field value")
	errFieldName          = errors.New("h2edge: invalid header field name")
	errPseudoAfterRegular = errors.New("h2edge: pseudo-field after a regular field")
	errPseudo             = errors.New("h2edge: unknown or duplicate pseudo-field, or a request's and a response's")
)

// init sets the decoder up for b; its emit function is b's from now on.
// A max of 0 is x/net's default, 16 MiB.
func (b *headerBlock) init(dec *hpack.Decoder, max uint32) {
	if max == 0 {
		max = 16 << 20
	}
	b.dec, b.max = dec, max
	dec.SetEmitFunc(b.emit)
	if max <= 1<<31-1 {
		dec.SetMaxStringLength(int(max))
	}
}

// read decodes the block that hf begins, reading its CONTINUATION frames
// from fr. An error is a ConnectionError or a StreamError, as x/net's
// framer returns them, or the framer's own.
func (b *headerBlock) read(fr *http2.Framer, hf *http2.HeadersFrame) error {
	clear(b.fields)
	b.fields = b.fields[:0]
	b.npseudo, b.truncated, b.sawRegular, b.invalid = 0, false, false, nil
	b.headersLeft, b.trailersLeft = b.max, b.max
	b.dec.SetEmitEnabled(true)
	frag, ended := hf.HeaderBlockFragment(), hf.HeadersEnded()
	for {
		if int64(len(frag)) > 2*(int64(b.headersLeft)+int64(b.trailersLeft)) {
			return http2.ConnectionError(errCodeProtocol)
		}
		if b.invalid != nil {
			return http2.ConnectionError(errCodeProtocol)
		}
		if _, err := b.dec.Write(frag); err != nil {
			return http2.ConnectionError(errCodeCompression)
		}
		if ended {
			break
		}
		f, err := fr.ReadFrame()
		if err != nil {
			return err
		}
		cf, ok := f.(*http2.ContinuationFrame) // the framer checks the order
		if !ok {
			return http2.ConnectionError(errCodeProtocol)
		}
		frag, ended = cf.HeaderBlockFragment(), cf.HeadersEnded()
	}
	if err := b.dec.Close(); err != nil {
		return http2.ConnectionError(errCodeCompression)
	}
	if b.invalid != nil {
		return http2.StreamError{StreamID: hf.StreamID, Code: errCodeProtocol, Cause: b.invalid}
	}
	if err := b.checkPseudos(); err != nil {
		return http2.StreamError{StreamID: hf.StreamID, Code: errCodeProtocol, Cause: err}
	}
	return nil
}

// emit takes one decoded field.
func (b *headerBlock) emit(f hpack.HeaderField) {
	if !httpguts.ValidHeaderFieldValue(f.Value) {
		b.invalid = errFieldValue // not naming the value: it may be a secret
	}
	if strings.HasPrefix(f.Name, ":") {
		if b.sawRegular {
			b.invalid = errPseudoAfterRegular
		}
	} else {
		b.sawRegular = true
		if !validFieldName(f.Name) {
			b.invalid = errFieldName
		}
	}
	if b.invalid != nil {
		b.dec.SetEmitEnabled(false)
		return
	}
	left, size := &b.headersLeft, f.Size()
	if f.Name == "trailer" {
		// Each name the value lists counts as a field, without building
		// them.
		n := uint32(strings.Count(f.Value, ",") + 1)
		left, size = &b.trailersLeft, uint32(len(f.Value))-n+1+n*hpack.HeaderField{}.Size()
	}
	if size > *left {
		b.dec.SetEmitEnabled(false)
		b.truncated = true
		b.headersLeft, b.trailersLeft = 0, 0
		return
	}
	*left -= size
	if !b.sawRegular {
		b.npseudo++
	}
	b.fields = append(b.fields, f)
}

// validFieldName: a non-empty token in lower case (RFC 9113 section
// 8.2.1).
func validFieldName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if !httpguts.IsTokenRune(r) || ('A' <= r && r <= 'Z') {
			return false
		}
	}
	return true
}

// checkPseudos: each pseudo-field known and there once, and not a
// request's mixed with a response's (a response's alone is refused by
// processHeaders).
func (b *headerBlock) checkPseudos() error {
	var request, response bool
	pf := b.pseudo()
	for i, f := range pf {
		switch f.Name {
		case ":method", ":path", ":scheme", ":authority", ":protocol":
			request = true
		case ":status":
			response = true
		default:
			return errPseudo
		}
		for _, g := range pf[:i] {
			if f.Name == g.Name {
				return errPseudo
			}
		}
	}
	if request && response {
		return errPseudo
	}
	return nil
}

func (b *headerBlock) pseudo() []hpack.HeaderField { return b.fields[:b.npseudo] }

// pseudoValue is the value of the pseudo-field name (":" included), or "".
func (b *headerBlock) pseudoValue(name string) string {
	for _, f := range b.pseudo() {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// regular is a copy of the block's regular fields, the stream's to keep;
// nil if none.
func (b *headerBlock) regular() []hpack.HeaderField {
	rf := b.fields[b.npseudo:]
	if len(rf) == 0 {
		return nil
	}
	return append(make([]hpack.HeaderField, 0, len(rf)), rf...)
}

// release lets the block's fields go: their strings are the stream's
// now, and a long list is not kept.
func (b *headerBlock) release() {
	clear(b.fields)
	if cap(b.fields) > keptFields {
		b.fields = nil
	}
	b.fields = b.fields[:0]
}
