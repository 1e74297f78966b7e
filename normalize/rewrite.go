package normalize

import (
	"bytes"
	"fmt"
	"slices"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// successPrefix opens every body Rewrite produces (SHAPES.md "Envelopes":
// variant A success, keys in this order).
const successPrefix = `{"message":"OK","status_code":"1","data":`

// input is a jsontext decoder over an in-memory slice. Reading from a
// bytes.Buffer lets the decoder parse the slice in place, without copying.
type input struct {
	dec jsontext.Decoder
	buf bytes.Buffer
	// depth is the number of containers of the body around the slice's value.
	// The decoder counts nesting from its slice, the output from the body.
	depth int
}

func (in *input) reset(b []byte, depth int) {
	in.depth = depth
	in.buf = *bytes.NewBuffer(b)
	in.dec.Reset(&in.buf)
}

// rewriter holds the state of one Rewrite or Failure call. Rewriters are
// pooled so a call allocates nothing once the pool is warm.
type rewriter struct {
	opt         Options
	out         []byte
	meta        Meta
	timeMissing bool // an item had no integer TimeField
	haveMax     bool // meta.MaxTime holds an item's time

	scan scanner // the envelope, and data that passes through
	data input   // data that is rewritten
	aux  input   // second passes inside a transaction
	text []byte  // scratch for unescaped strings
}

var rewriters = sync.Pool{New: func() any { return new(rewriter) }}

func getRewriter(opt Options, out []byte) *rewriter {
	r := rewriters.Get().(*rewriter)
	r.opt, r.out, r.meta = opt, out, Meta{}
	r.timeMissing, r.haveMax = false, false
	return r
}

func putRewriter(r *rewriter) {
	// Drop every reference to the caller's bytes before pooling.
	r.out = nil
	r.scan.reset(nil)
	r.data.reset(nil, 0)
	r.aux.reset(nil, 0)
	if cap(r.text) > 4<<10 {
		r.text = nil
	}
	rewriters.Put(r)
}

// Rewrite appends to dst the variant A body for the upstream body src and
// reports Meta. dst and src must not overlap. On error dst is returned with
// its original length and Meta is zero; the error is a *FailureError for a
// failure envelope and wraps ErrInvalid for a body that cannot be served.
func Rewrite(dst, src []byte, opt Options) ([]byte, Meta, error) {
	if !opt.Shape.valid() {
		return dst, Meta{}, fmt.Errorf("normalize: unknown shape %v", opt.Shape)
	}
	// The output is about the size of the input; growing once up front
	// saves the copies of repeated appends on large order book pages.
	r := getRewriter(opt, slices.Grow(dst, len(src)+len(successPrefix)+1))
	defer putRewriter(r)
	env, err := r.envelope(src, true)
	if err != nil {
		return dst, Meta{}, err
	}
	if !env.success {
		return dst, Meta{}, &FailureError{Code: r.failureCode(env), Message: r.unquote(env.message)}
	}
	return r.out, r.meta, nil
}

// Failure reads the code and message of a failure envelope (B or A) without
// rewriting; ok is false when src is not a well-formed failure envelope.
// Used by the proxy for non-200 upstream answers. code is variant B's code,
// or "0" for variant A.
func Failure(src []byte) (code, message string, ok bool) {
	r := getRewriter(Options{}, nil)
	defer putRewriter(r)
	env, err := r.envelope(src, false)
	if err != nil || env.success {
		return "", "", false
	}
	return r.failureCode(env), r.unquote(env.message), true
}

// dataAt writes the data value at src[at] and returns the offset past it.
// Variant A data (SHAPES.md: an A body passes unchanged) and order book data
// (SHAPES.md 1) are validated by the scanner and copied byte for byte; the
// rest is rewritten token by token from a decoder started at the value.
func (r *rewriter) dataAt(src []byte, at int, passthrough bool) (int, error) {
	if passthrough || r.opt.Shape == OrderBook {
		end, err := r.inspect(at)
		if err != nil {
			return end, err
		}
		r.out = append(r.out, src[at:end]...)
		return end, nil
	}
	if r.opt.Shape == Transaction {
		return r.transactionAt(at)
	}
	in := &r.data
	in.reset(src[at:], 1)
	var err error
	switch r.opt.Shape {
	case WalletAddress:
		err = r.wallet(in)
	default:
		err = r.list(in, itemFields(r.opt.Shape))
	}
	return at + int(in.dec.InputOffset()), err
}

func (r *rewriter) failureCode(env envelope) string {
	if env.variant == 'A' {
		return "0"
	}
	return r.unquote(env.code)
}

// unquote returns the text of a raw JSON string; "" for nil.
func (r *rewriter) unquote(raw []byte) string {
	if raw == nil {
		return ""
	}
	return string(r.textOf(raw))
}
