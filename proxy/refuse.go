package proxy

import "tradergate/proxy/wire"

// refuse answers a request its front refused (wire.Request.Refused). It
// is charged to the client's address, never to a key: the edge did not
// read the request far enough to trust one.
func (s *Server) refuse(x *exchange) {
	x.CloseConn = true
	x.principal = nil
	if s.rateLimit(x) {
		x.fail(fail(refusals[x.Refused]))
	}
}

// refusals are the rows of the error table (errors.go) of what a front
// refuses.
var refusals = [...]failure{
	wire.RefusedMalformed:      failMalformed,
	wire.RefusedHTTPVersion:    failHTTPVersion,
	wire.RefusedHeaderTooLarge: failHeaderTooLarge,
	wire.RefusedURITooLong:     failURITooLong,
	wire.RefusedTimeout:        failRequestTimeout,
	wire.RefusedBody:           failBody,
}
