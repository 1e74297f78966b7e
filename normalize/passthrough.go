package normalize

import (
	"fmt"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// Verify is Rewrite for a client that is served variant B as the legacy
// host sent it (the legacy paths at the edge): src is read and checked
// exactly as Rewrite checks it, Meta gathered, and the rewrite that check
// produces is thrown away, so a body passed through byte for byte is never
// one the /v1 paths would have refused. Beyond Rewrite's errors, a body in
// variant A is errInvalid: it cannot be passed to a variant B client.
//
// scratch is room for that discarded rewrite; the buffer is returned,
// emptied, for the caller to reuse.
func Verify(scratch, src []byte, opt Options) ([]byte, Meta, error) {
	if !opt.Shape.valid() {
		return scratch[:0], Meta{}, fmt.Errorf("normalize: unknown shape %v", opt.Shape)
	}
	r := getRewriter(opt, scratch[:0])
	defer putRewriter(r)
	env, err := r.envelope(src, true)
	out := r.out[:0]
	switch {
	case err != nil:
		return out, Meta{}, err
	case !env.success:
		return out, Meta{}, &FailureError{Code: r.failureCode(env), Message: r.unquote(env.message)}
	case env.variant != 'B':
		return out, Meta{}, invalidf("a variant A body where variant B is passed through")
	}
	return out, r.meta, nil
}

// AppendFailureB appends a variant B failure body
// {"success":false,"code":"<status>","message":<msg>,"data":null}
// (docs/CONTRACT.md "Envelopes"), msg JSON-escaped: what the edge answers
// on the legacy paths when it refuses a request itself.
func AppendFailureB(dst []byte, status int, message string) []byte {
	dst = append(dst, `{"success":false,"code":"`...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = append(dst, `","message":`...)
	dst, _ = jsontext.AppendQuote(dst, message)
	return append(dst, `,"data":null}`...)
}
