package proxy

import "net/http"

// openAPIPath serves the contract as an OpenAPI document
// (docs/CONTRACT.md#openapi), embedded by package docs.
const openAPIPath = "/v1/openapi.json"

// serveOpenAPI answers GET /v1/openapi.json without a key: the document is
// public, the same for everyone. It runs after the rate limit, which
// charges a caller without a key to its address, so that the largest body
// the edge holds in memory cannot be asked for without bound.
func (s *Server) serveOpenAPI(x *exchange) bool {
	if x.path != openAPIPath || x.legacy {
		return false
	}
	if x.method != methodGet && x.method != methodHead {
		x.setHeader("Allow", "GET, HEAD")
		x.fail(fail(failMethod))
		return true
	}
	// It changes only with the binary.
	x.setHeader("Cache-Control", "public, max-age=300")
	x.reply(http.StatusOK, s.openAPI)
	return true
}
