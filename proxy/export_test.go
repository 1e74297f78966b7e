package proxy

import "github.com/valyala/fasthttp"

// FastHandler is the HTTP/1.1 front's handler, for benchmarks and tests
// that drive it with a fasthttp.RequestCtx of their own.
func (s *Server) FastHandler() fasthttp.RequestHandler { return s.serveFast }
