package normalize

import (
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
)

// errInvalid: src is not valid JSON, not an envelope, or data does not have
// the shape's form (e.g. items not an array, a price that is not a decimal).
// Returned wrapped with detail (errors.Is works). The proxy answers it as an
// invalid upstream (502), never caches it.
var errInvalid = errors.New("invalid upstream body")

// FailureError: src is a failure envelope (variant B success:false, or
// variant A status_code "0"; docs/CONTRACT.md "Response envelopes").
type FailureError struct {
	// Code is variant B's code (the HTTP status as a string, e.g. "429"),
	// or "0" for a variant A failure, which carries no HTTP status.
	Code    string
	Message string
}

func (e *FailureError) Error() string {
	return fmt.Sprintf("upstream failure (code %q): %s", e.Code, e.Message)
}

// AppendError appends a variant A failure body
// {"message":<msg>,"status_code":"0","data":null} (docs/CONTRACT.md "Errors"), msg
// JSON-escaped. The one place the variant A error envelope is written.
func AppendError(dst []byte, message string) []byte {
	dst = append(dst, `{"message":`...)
	// AppendQuote replaces invalid UTF-8 with U+FFFD and reports it; the
	// body is valid either way, and a client message is better than none.
	dst, _ = jsontext.AppendQuote(dst, message)
	return append(dst, `,"status_code":"0","data":null}`...)
}

// invalidf wraps errInvalid with detail.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errInvalid}, args...)...)
}
