package proxy

import (
	"tradergate/proxy/route"
	"tradergate/proxy/wire"
)

// route matches the path, refuses wrong methods, oversized URLs, bodies and
// routes the key may not use, and validates the request into its canonical
// form (docs/CONTRACT.md "Routes", "Errors").
func (s *Server) route(x *exchange) bool {
	// A target validated before is neither matched nor validated again
	// (route/memo.go); the checks of the exchange itself still run, in
	// the same order, so the answer is the one it would have been.
	req, h := s.routes.Recall(x.Target, x.legacy)
	if req != nil {
		x.route = req.Route
		if !s.admit(x) {
			return false
		}
		x.req = req
		return true
	}
	match, validate := s.routes.Match, (*route.Route).ValidateInto
	if x.legacy {
		match, validate = s.routes.MatchLegacy, (*route.Route).ValidateLegacyInto
	}
	rt, param := match(x.Path)
	if rt == nil {
		x.fail(fail(failNotFound))
		return false
	}
	x.route = rt
	if !s.admit(x) {
		return false
	}
	if err := validate(rt, &x.reqBuf, param, x.RawQuery); err != nil {
		x.fail(err)
		return false
	}
	x.req = &x.reqBuf
	s.routes.Remember(h, x.Target, x.legacy, x.req)
	return true
}

// checkLength refuses a target over 8 KiB with 414 (docs/CONTRACT.md
// "Errors"): on every path, known or not, and before a missing key's 401,
// so that the answer to a URL that long is the same with or without a key.
func checkLength(x *exchange) bool {
	if len(x.Target) > wire.MaxTargetBytes {
		x.CloseConn = true // a client this far off is not worth a keep-alive
		x.fail(fail(failURITooLong))
		return false
	}
	return true
}

// admit checks what the route step refuses whatever the target: the
// method, a body, and the key's right to the route. The target's length
// was checked before (checkLength).
func (s *Server) admit(x *exchange) bool {
	if !admitMethodAndBody(x) {
		return false
	}
	if !x.principal.Allowed(x.route) {
		x.fail(fail(failForbidden))
		return false
	}
	return true
}

// admitMethodAndBody refuses what no path of /v1 takes: a method other
// than GET or HEAD, and a body.
func admitMethodAndBody(x *exchange) bool {
	if x.Method != methodGet && x.Method != methodHead {
		// Every endpoint uses GET (docs/CONTRACT.md "Routes"); HEAD is GET
		// without a body (RFC 9110 section 9.3.2).
		x.SetHeader("Allow", "GET, HEAD")
		x.fail(fail(failMethod))
		return false
	}
	if x.HasBody {
		// A GET body has no meaning (RFC 9110 section 9.3.1), and reading
		// one is work a client should not be able to ask for.
		x.CloseConn = true
		x.fail(fail(failBody))
		return false
	}
	return true
}

// The methods the edge answers, as the fronts spell them.
const (
	methodGet  = "GET"
	methodHead = "HEAD"
)
