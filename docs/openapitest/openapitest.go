// Package openapitest holds answers of the edge to the OpenAPI document of
// package docs (docs/openapi.json), for tests: status, headers and body are
// validated with github.com/pb33f/libopenapi-validator, which reads OpenAPI
// 3.1 and validates schemas as JSON Schema 2020-12.
//
//	v := openapitest.New(t)
//	resp, body := ... // a GET through the edge
//	v.Response(t, req, resp, body)
//
// Two answers belong to no documented operation, and are checked the way
// docs/CONTRACT.md#openapi says: a 405 against the GET operation of its
// path, and an answer to an unknown path against the Error schema.
package openapitest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	liberrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel"
	"github.com/pb33f/libopenapi/datamodel/high/base"

	"tradergate/docs"
)

// Validator checks HTTP answers against one OpenAPI document. It is not
// safe for concurrent use: give each goroutine its own.
type Validator struct {
	v        validator.Validator
	errorDoc *base.Schema // components.schemas.Error
	schemas  schema_validation.SchemaValidator
}

// New returns a Validator of the repository's document, failing tb when
// the document does not load or does not pass the validator's own check
// of it against the OpenAPI 3.1 specification.
func New(tb testing.TB) *Validator {
	tb.Helper()
	v, err := Load(docs.OpenAPI())
	if err != nil {
		tb.Fatalf("openapitest: docs/openapi.json: %v", err)
	}
	return v
}

// Load builds a Validator of the OpenAPI document spec. The error lists
// every problem found when spec is not a valid OpenAPI document.
func Load(spec []byte) (*Validator, error) {
	// The library logs what it cannot build; Load reports it as an error
	// instead, so the log would only repeat it.
	cfg := datamodel.NewDocumentConfiguration()
	cfg.Logger = slog.New(slog.DiscardHandler)
	doc, err := libopenapi.NewDocumentWithConfiguration(spec, cfg)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		return nil, fmt.Errorf("build model: %w", errors.Join(errs...))
	}
	if ok, errs := v.ValidateDocument(); !ok {
		return nil, fmt.Errorf("not a valid OpenAPI document:\n%s", format(errs))
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("build model: %w", err)
	}
	var errSchema *base.Schema
	if c := model.Model.Components; c != nil && c.Schemas != nil {
		if p := c.Schemas.GetOrZero("Error"); p != nil {
			errSchema = p.Schema()
		}
	}
	if errSchema == nil {
		return nil, errors.New("no components.schemas.Error")
	}
	return &Validator{v: v, errorDoc: errSchema, schemas: schema_validation.NewSchemaValidator()}, nil
}

// Response fails tb, with every violation and the body, when resp (whose
// body, already read, is body) is not an answer the document allows to
// req. req is the request as sent: its method and path select the
// operation. The document describes GET; a HEAD answer (no body) is not
// checked by it.
func (v *Validator) Response(tb testing.TB, req *http.Request, resp *http.Response, body []byte) {
	tb.Helper()
	if errs := v.ResponseErrors(req, resp, body); len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = "  - " + e.Error()
		}
		tb.Errorf("%s %s: %d answer does not match docs/openapi.json:\n%s\nbody: %s",
			req.Method, req.URL.RequestURI(), resp.StatusCode, strings.Join(msgs, "\n"), excerpt(body))
	}
}

// ResponseErrors is Response without a test: the violations, none when
// the answer is valid. Tests use it to prove that an altered answer is
// refused.
func (v *Validator) ResponseErrors(req *http.Request, resp *http.Response, body []byte) []error {
	lookup := req
	if resp.StatusCode == http.StatusMethodNotAllowed && req.Method != http.MethodGet {
		// Every method but GET and HEAD is a 405; the document says so
		// once, under the GET operation (docs/CONTRACT.md#openapi).
		lookup = req.Clone(req.Context())
		lookup.Method = http.MethodGet
	}
	ok, errs := v.v.ValidateHttpResponse(lookup, withBody(resp, body))
	if ok {
		return nil
	}
	for _, e := range errs {
		if e.IsPathMissingError() {
			return v.unknownPath(resp, body)
		}
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = readable(e)
	}
	return out
}

// unknownPath checks an answer to a path the document does not hold: an
// error the edge gives before or instead of routing (401, 404, 429, ...),
// in the variant A failure envelope.
func (v *Validator) unknownPath(resp *http.Response, body []byte) []error {
	var out []error
	if resp.StatusCode < 400 {
		out = append(out, fmt.Errorf("status %d for a path the document does not hold; want an error", resp.StatusCode))
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		out = append(out, fmt.Errorf("Cache-Control %q on an error; want no-store", cc))
	}
	if ok, errs := v.schemas.ValidateSchemaBytes(v.errorDoc, body); !ok {
		for _, e := range errs {
			out = append(out, readable(e))
		}
	}
	return out
}

// withBody is resp with a fresh reader of body, for the validator to
// consume; resp itself is left as it was.
func withBody(resp *http.Response, body []byte) *http.Response {
	r := *resp
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return &r
}

// readable turns a validation error into one line per violation, with the
// JSON path of each schema failure.
func readable(e *liberrors.ValidationError) error {
	var b strings.Builder
	b.WriteString(e.Message)
	if e.Reason != "" && e.Reason != e.Message {
		b.WriteString(": " + e.Reason)
	}
	for _, f := range e.SchemaValidationErrors {
		b.WriteString("\n      ")
		if f.FieldPath != "" {
			b.WriteString(f.FieldPath + ": ")
		}
		b.WriteString(f.Reason)
	}
	return errors.New(b.String())
}

func format(errs []*liberrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString("  - " + readable(e).Error() + "\n")
	}
	return b.String()
}

// excerpt keeps a failure message readable when the body is a large page.
func excerpt(body []byte) string {
	const max = 2048
	if len(body) > max {
		return string(body[:max]) + fmt.Sprintf("... (%d bytes)", len(body))
	}
	return string(body)
}
