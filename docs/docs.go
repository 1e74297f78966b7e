// Package docs holds the contract tradergate serves: CONTRACT.md in words
// and openapi.json as an OpenAPI 3.1 document, embedded here so that the
// edge can serve it at GET /v1/openapi.json (docs/CONTRACT.md#openapi) and
// tests can hold real answers to it (package docs/openapitest).
package docs

import _ "embed"

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI document, JSON. Each call returns a fresh
// copy: the caller may keep or change it without touching what others get.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }
