package proxy

import (
	"net/http"

	"tradergate/limits"
)

// msgLimitStore answers a request whose allowance could not be checked when
// limits.on_store_error is deny.
const msgLimitStore = "Rate limit unavailable"

// rateLimit charges the request to its key's window, or, for a missing or
// unknown key, to the client address's window (issue 4: key guessing is
// throttled). Every response the edge sends carries that bucket's
// X-RateLimit-* fields (SPEC "Limits"), errors and cache hits included,
// because they are set here, before anything answers. A spent allowance is
// a 429 with Retry-After until the window resets (SPEC "Limits" rules 1-2).
func (s *Server) rateLimit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := state(r)
		var d limits.Decision
		if p := st.principal; p != nil {
			d = s.limiter.Take(r.Context(), "key:"+p.KeyID, p.Limit, p.Plan)
		} else {
			d = s.limiter.Take(r.Context(), limits.IPBucket(s.limiter.ClientIP(r)), s.limiter.Anonymous(), limits.AnonymousPolicy)
		}
		d.SetHeaders(w.Header(), st.now)
		if !d.Allowed {
			// Retry-After is already set by SetHeaders, in step with
			// X-RateLimit-Reset.
			if d.StoreErr != nil {
				writeError(w, r, &Error{Status: http.StatusServiceUnavailable, Message: msgLimitStore, Err: d.StoreErr})
				return
			}
			s.metrics.refused.WithLabelValues(d.Policy).Inc()
			writeError(w, r, &Error{Status: http.StatusTooManyRequests, Message: msgRateLimited})
			return
		}
		next.ServeHTTP(w, r)
	})
}
