package proxy

// refuse answers a request its front refused (exchange.refused). It is
// charged to the client's address, never to a key: the edge did not read
// the request far enough to trust one.
func (s *Server) refuse(x *exchange) {
	x.closeConn = true
	x.principal = nil
	if s.rateLimit(x) {
		x.fail(fail(x.refused))
	}
}
