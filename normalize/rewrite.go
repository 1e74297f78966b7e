package normalize

import (
	"fmt"
	"slices"
	"sync"

	"tradergate/internal/poison"
)

// SuccessPrefix opens every variant A success body: the data follows it,
// and a closing brace ends the body (docs/CONTRACT.md#envelopes;
// SHAPES.md "Envelopes": keys in this order). Rewrite writes it, and so
// does every answer the edge builds itself.
const SuccessPrefix = `{"message":"OK","status_code":"1","data":`

// rewriter holds the state of one Rewrite or Failure call. Rewriters are
// pooled so a call allocates nothing once the pool is warm.
type rewriter struct {
	opt         Options
	out         []byte
	meta        Meta
	timeMissing bool // an item had no integer TimeField
	haveMax     bool // meta.MaxTime holds an item's time

	scan scanner // reads and validates the whole body
	text []byte  // scratch for unescaped strings
}

var rewriters = sync.Pool{New: func() any { return new(rewriter) }}

func getRewriter(opt Options, out []byte) *rewriter {
	r := rewriters.Get().(*rewriter)
	r.opt, r.out, r.meta = opt, out, Meta{}
	r.timeMissing, r.haveMax = false, false
	return r
}

// A pooled rewriter keeps at most maxScratch bytes of unescaped text and
// room for maxNames member names (names of the objects open at once: a
// page of items needs a few dozen).
const (
	maxScratch = 4 << 10
	maxNames   = 1024
)

func putRewriter(r *rewriter) {
	// Drop every reference to the caller's bytes before pooling.
	r.out = nil
	r.scan.reset(nil)
	// Nor keep what one odd body grew: an object of many members, or many
	// escaped names, would otherwise pin its scratch for every later call.
	if cap(r.text) > maxScratch {
		r.text = nil
	}
	if cap(r.scan.text) > maxScratch || cap(r.scan.names) > maxNames {
		r.scan = scanner{}
	}
	poison.Fill(r.text[:cap(r.text)])
	poison.Fill(r.scan.text[:cap(r.scan.text)])
	rewriters.Put(r)
}

// Rewrite appends to dst the variant A body for the upstream body src and
// reports Meta. dst and src must not overlap. On error dst is returned with
// its original length and Meta is zero; the error is a *FailureError for a
// failure envelope and wraps errInvalid for a body that cannot be served.
func Rewrite(dst, src []byte, opt Options) ([]byte, Meta, error) {
	if !opt.Shape.valid() {
		return dst, Meta{}, fmt.Errorf("normalize: unknown shape %v", opt.Shape)
	}
	// The output is about the size of the input; growing once up front
	// saves the copies of repeated appends on large order book pages.
	r := getRewriter(opt, slices.Grow(dst, len(src)+len(SuccessPrefix)+1))
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
// (SHAPES.md 1) are validated, their Meta read, and copied byte for byte;
// the rest is rewritten as it is read.
func (r *rewriter) dataAt(at int, passthrough bool) (int, error) {
	s := &r.scan
	b := s.src
	write := !passthrough && r.opt.Shape != OrderBook
	switch {
	case at < len(b) && b[at] == 'n':
		// docs/CONTRACT.md "Response envelopes" rule 1: a lookup that finds nothing is a 200 with data
		// null, not an error; it passes as null for the policy to see.
		r.meta.DataNull = true
		if write && r.opt.Shape == WalletAddress {
			// docs/CONTRACT.md: data.walletAddress is null when no mapping exists,
			// so variant A never has data null here (SHAPES.md 8).
			r.out = append(r.out, `{"walletAddress":null}`...)
		} else {
			r.out = append(r.out, "null"...)
		}
		return s.literal(at, "null")
	case at < len(b) && b[at] != '{':
		return at, invalidf("data is a JSON %s, not an object or null", kindOf(b[at]))
	}
	var end int
	var err error
	switch {
	case r.opt.Shape == Transaction && write:
		end, err = r.transaction(at)
	case r.opt.Shape == Transaction:
		end, err = s.value(at, 1)
	case r.opt.Shape == WalletAddress:
		end, err = r.wallet(at, write)
	default:
		end, err = r.list(at, write)
	}
	if err == nil && !write {
		r.out = append(r.out, b[at:end]...)
	}
	return end, err
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
