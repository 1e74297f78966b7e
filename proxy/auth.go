package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	"tradergate/limits"
)

// Authentication at the edge (SPEC "Authentication"; DESIGN.md: auth comes
// before the cache, so a cached page is never served to a request the edge
// has not authenticated and authorised).

// Principal is an authenticated client key. It carries the key's id, never
// the key.
type Principal struct {
	KeyID string
	Plan  string
	// Limit is the key's allowance: its plan's, or its own override.
	Limit limits.Plan
	// routes has bit i set when the key may use route index i.
	routes uint64
}

// Allowed reports whether the key may use the route.
func (p *Principal) Allowed(r *Route) bool { return p.routes&(1<<r.index) != 0 }

// keySet finds a principal by the SHA-256 of a presented key. Comparing
// hashes in a map leaks, through timing, at most which hash prefix is near a
// stored one: nothing about the key itself, which never needs comparing.
type keySet struct {
	byHash map[[sha256.Size]byte]*Principal
}

// maxKeyLen bounds the work an unauthenticated client can ask for.
const maxKeyLen = 512

func newKeySet(keys []KeyConfig, plans map[string]limits.Plan, routes []*Route) *keySet {
	ks := &keySet{byHash: make(map[[sha256.Size]byte]*Principal, len(keys))}
	for _, k := range keys {
		var h [sha256.Size]byte
		if _, err := hex.Decode(h[:], []byte(k.SHA256)); err != nil {
			continue // Validate refuses such keys before this runs.
		}
		p := &Principal{KeyID: k.ID, Plan: k.Plan, Limit: plans[k.Plan]}
		if k.Limit != nil {
			p.Limit = *k.Limit
		}
		for _, name := range k.Routes {
			for _, r := range routes {
				if name == "*" || name == r.Name {
					p.routes |= 1 << r.index
				}
			}
		}
		ks.byHash[h] = p
	}
	return ks
}

// lookup returns the principal of an Authorization header value, or nil.
func (ks *keySet) lookup(authorization string) *Principal {
	key, ok := bearer(authorization)
	if !ok {
		return nil
	}
	return ks.byHash[sha256.Sum256([]byte(key))]
}

// bearer extracts the token of "Bearer <token>"; the scheme is
// case-insensitive (RFC 9110 section 11.1).
func bearer(h string) (string, bool) {
	const scheme = "bearer "
	if len(h) <= len(scheme) || len(h) > len(scheme)+maxKeyLen || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	key := strings.TrimSpace(h[len(scheme):])
	return key, key != ""
}

// HashKey is the SHA-256 hex of a key, as it goes into keys[].sha256.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// authenticate resolves the caller's key to a principal. It does not refuse
// anything: the limiter first charges the request to the key or, for a
// missing or unknown key, to the client's address, and requireKey answers
// 401 after that.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := state(r)
		if p := s.keys.Load().lookup(r.Header.Get("Authorization")); p != nil {
			st.principal = p
			st.keyID = p.KeyID
		}
		next.ServeHTTP(w, r)
	})
}

// requireKey answers 401 to a request without a valid key.
func (s *Server) requireKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if state(r).principal == nil {
			// RFC 6750 section 3: a 401 names the scheme it wants.
			w.Header().Set("WWW-Authenticate", `Bearer realm="tradergate"`)
			writeError(w, r, &Error{Status: http.StatusUnauthorized, Message: msgUnauthorized})
			return
		}
		next.ServeHTTP(w, r)
	})
}
