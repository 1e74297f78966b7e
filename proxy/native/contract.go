package native

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"tradergate/proxy/route"
)

// contract checks native's answers against the OpenAPI document
// (docs/openapi.json): a 200 body must be one the document allows for the
// route's operation. Only the body is checked: the headers a client gets
// are the edge's own, whoever made the page.
type contract struct {
	// mu serialises the validator, whose schema objects are built lazily
	// and are not documented as safe for concurrent use.
	mu      sync.Mutex
	v       schema_validation.SchemaValidator
	schemas map[string]*base.Schema // route name -> the 200 JSON schema
}

// newContract reads spec and finds the 200 answer's schema of every route
// that reaches a backend (a route the edge builds has none to check).
func newContract(spec []byte, routes []*route.Route) (*contract, error) {
	cfg := datamodel.NewDocumentConfiguration()
	cfg.Logger = slog.New(slog.DiscardHandler)
	doc, err := libopenapi.NewDocumentWithConfiguration(spec, cfg)
	if err != nil {
		return nil, fmt.Errorf("openapi document: %w", err)
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("openapi document: %w", err)
	}
	if model.Model.Paths == nil || model.Model.Paths.PathItems == nil {
		return nil, errors.New("openapi document: no paths")
	}
	c := &contract{
		v:       schema_validation.NewSchemaValidatorWithLogger(slog.New(slog.DiscardHandler)),
		schemas: map[string]*base.Schema{},
	}
	for _, rt := range routes {
		if rt.EdgeBuilt {
			continue
		}
		s, err := okSchema(model.Model.Paths.PathItems.GetOrZero(rt.Pattern))
		if err != nil {
			return nil, fmt.Errorf("openapi document: GET %s: %w", rt.Pattern, err)
		}
		c.schemas[rt.Name] = s
	}
	return c, nil
}

// okSchema is the schema of a path's GET 200 application/json answer.
func okSchema(pi *v3.PathItem) (*base.Schema, error) {
	if pi == nil || pi.Get == nil {
		return nil, errors.New("no such operation")
	}
	if pi.Get.Responses == nil || pi.Get.Responses.Codes == nil {
		return nil, errors.New("no responses")
	}
	ok := pi.Get.Responses.Codes.GetOrZero("200")
	if ok == nil || ok.Content == nil {
		return nil, errors.New("no 200 content")
	}
	mt := ok.Content.GetOrZero("application/json")
	if mt == nil || mt.Schema == nil {
		return nil, errors.New("no 200 application/json schema")
	}
	s := mt.Schema.Schema()
	if s == nil {
		return nil, fmt.Errorf("200 schema does not build: %v", mt.Schema.GetBuildError())
	}
	return s, nil
}

// check returns the ways body breaks the contract of routeName's 200
// answer; none when it keeps it (or the route has no schema).
func (c *contract) check(routeName string, body []byte) []string {
	s := c.schemas[routeName]
	if s == nil {
		return nil
	}
	c.mu.Lock()
	ok, errs := c.v.ValidateSchemaBytes(s, body)
	c.mu.Unlock()
	if ok {
		return nil
	}
	var out []string
	for _, e := range errs {
		if len(e.SchemaValidationErrors) == 0 {
			out = append(out, strings.TrimSpace(e.Message+": "+e.Reason))
		}
		for _, f := range e.SchemaValidationErrors {
			out = append(out, strings.TrimSpace(f.FieldPath+": "+f.Reason))
		}
	}
	if len(out) == 0 {
		out = append(out, "does not match the document")
	}
	return out
}
