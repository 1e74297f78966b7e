package proxy

import (
	"net/http"

	"tradergate/proxy/route"
	"tradergate/proxy/wire"
)

// openAPIPath serves the contract as an OpenAPI document
// (docs/CONTRACT.md#openapi), embedded by package docs.
const openAPIPath = "/v1/openapi.json"

// isOpenAPI reports whether r asks for the OpenAPI document (never on a
// legacy path).
func isOpenAPI(r *wire.Request, legacy bool) bool { return r.Path == openAPIPath && !legacy }

// serveOpenAPI answers GET /v1/openapi.json without a key: the document is
// public, the same for everyone. The request is charged to the client's
// address whatever key it carries (docs/CONTRACT.md "Routes"), by the rate limit step before this one, so that the
// largest body the edge holds in memory cannot be asked for without
// bound; and it follows the rules of every /v1 path (docs/CONTRACT.md
// "Errors"): GET or HEAD, no body, a target of at most 8 KiB (checked
// before), a query string that parses.
func (s *Server) serveOpenAPI(x *exchange) {
	if !admitMethodAndBody(x) {
		return
	}
	if err := route.CheckQuery(x.RawQuery); err != nil {
		x.fail(err)
		return
	}
	// It changes only with the binary.
	x.SetHeader("Cache-Control", "public, max-age=300")
	x.Reply(http.StatusOK, s.openAPI)
}
