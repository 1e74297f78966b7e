package proxy

import "tradergate/limits"

// setRateLimit sets the rate limit fields of d on the answer, which keeps
// them whatever it turns out to be (wire.Answer.MarkAlways).
func (x *exchange) setRateLimit(d limits.Decision) {
	d.AppendHeaders(x.Values(), x.now, func(name, value string) {
		if value == "" {
			x.DelHeader(name)
			return
		}
		x.SetHeader(name, value)
	})
	x.MarkAlways()
}

// rateLimit charges the request to its key's window, or, for a missing or
// unknown key, to the client address's window, so that key guessing is
// throttled. Every response the edge sends carries that bucket's
// X-RateLimit-* fields (docs/CONTRACT.md "Rate limits"), errors and cache
// hits included, because they are set here, before anything answers. A
// spent allowance is a 429 with Retry-After until the window resets.
func (s *Server) rateLimit(x *exchange) bool {
	return s.allowed(x, s.take(x, 1))
}

// take charges n requests to the request's bucket (see rateLimit) and sets
// the answer's X-RateLimit-* fields from the decision, as fields every
// answer keeps. A request that costs more than one (the order book at T,
// book.go) takes the rest after rateLimit took the first.
func (s *Server) take(x *exchange, n int64) limits.Decision {
	var d limits.Decision
	if p := x.principal; p != nil {
		d = s.limiter.TakeNAt(x.ctx, x.now, p.bucket, p.Limit, p.Plan, n)
	} else {
		ip := s.limiter.ClientIPFrom(x.Peer, x.ForwardedFor)
		d = s.limiter.TakeNAt(x.ctx, x.now, limits.NewBucket(limits.IPBucket(ip)), s.limiter.Anonymous(), limits.AnonymousPolicy, n)
	}
	x.setRateLimit(d)
	return d
}

// allowed answers a refused charge: 429 for a spent allowance, 503 when
// the store failed and on_store_error denies. It reports whether the
// request may go on.
func (s *Server) allowed(x *exchange, d limits.Decision) bool {
	if d.Allowed {
		return true
	}
	// Retry-After is already set by AppendHeaders (take), in step with
	// X-RateLimit-Reset.
	if d.StoreErr != nil {
		x.fail(&edgeError{kind: failLimitStore, Err: d.StoreErr})
		return false
	}
	s.metrics.refused.WithLabelValues(d.Policy).Inc()
	x.fail(fail(failRateLimited))
	return false
}
