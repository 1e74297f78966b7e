package proxy

import "time"

// SetShadowPostTTL sets how long the replica's posts for the fleet's GET
// /shadow last, from its next post on; without Redis it does nothing.
func SetShadowPostTTL(s *Server, ttl time.Duration) {
	if s.shadow != nil {
		s.shadow.SetPostTTL(ttl)
	}
}
