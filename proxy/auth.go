package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"sync/atomic"

	"tradergate/limits"
	"tradergate/proxy/config"
	"tradergate/proxy/migration"
	"tradergate/proxy/route"
	"tradergate/proxy/wire"
)

// Authentication at the edge (docs/CONTRACT.md "Authentication"). Auth comes
// before the cache, so a cached page is never served to a request the edge
// has not authenticated and authorised (docs/ARCHITECTURE.md "Auth before
// cache").

// principal is an authenticated client key. It carries the key's id, never
// the key.
type principal struct {
	KeyID string
	Plan  string
	// Limit is the key's allowance: its plan's, or its own override.
	Limit limits.Plan
	// bucket is the key's rate limit bucket, made once per load of the
	// keys: it remembers its current counter (limits.Bucket).
	bucket *limits.Bucket
	// routes has bit i set when the key may use route index i.
	routes uint64
	// legacyRetired: keys[].legacy is retired; its legacy calls are 410.
	legacyRetired bool
	// use is the key's migration counts, remembered after the first
	// request so that later ones skip the lookup (migrate, legacy.go).
	use atomic.Pointer[migration.Key]
}

// Allowed reports whether the key may use the route.
func (p *principal) Allowed(r *route.Route) bool { return p.routes&(1<<r.Index()) != 0 }

// keySet finds a principal by the SHA-256 of a presented key. Comparing
// hashes in a map leaks, through timing, at most which hash prefix is near a
// stored one: nothing about the key itself, which never needs comparing.
type keySet struct {
	byHash map[[sha256.Size]byte]*principal
}

// maxKeyLen bounds the work an unauthenticated client can ask for: the
// longest credential wire.Bearer reads.
const maxKeyLen = wire.MaxBearerLen

func newKeySet(keys []config.KeyConfig, plans map[string]limits.Plan, routes []*route.Route) *keySet {
	ks := &keySet{byHash: make(map[[sha256.Size]byte]*principal, len(keys))}
	for _, k := range keys {
		var h [sha256.Size]byte
		if _, err := hex.Decode(h[:], []byte(k.SHA256)); err != nil {
			continue // Validate refuses such keys before this runs.
		}
		p := &principal{KeyID: k.ID, Plan: k.Plan, Limit: plans[k.Plan], bucket: limits.NewBucket("key:" + k.ID),
			legacyRetired: k.Legacy == config.LegacyRetired}
		if k.Limit != nil {
			p.Limit = *k.Limit
		}
		for _, name := range k.Routes {
			for _, r := range routes {
				if name == "*" || name == r.Name {
					p.routes |= 1 << r.Index()
				}
			}
		}
		ks.byHash[h] = p
	}
	return ks
}

// lookup returns the principal of an Authorization header value, or nil.
func (ks *keySet) lookup(authorization string) *principal {
	key, ok := wire.Bearer(authorization)
	if !ok {
		return nil
	}
	// The key is hashed from a copy on the stack: []byte(key) is on the
	// heap for a key longer than 32 bytes, an allocation on every request.
	var buf [maxKeyLen]byte
	n := copy(buf[:], key)
	return ks.byHash[sha256.Sum256(buf[:n])]
}

// HashKey is the SHA-256 hex of a key, as it goes into keys[].sha256.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// authenticate resolves the caller's key to a principal, nil for none. It does not refuse
// anything: the limiter first charges the request to the key or, for a
// missing or unknown key, to the client's address, and requireKey answers
// 401 after that.
func (s *Server) authenticate(r *wire.Request) *principal {
	if r.Authorizations > 1 {
		return nil // ambiguous: no key is taken, requireKey says why
	}
	return s.keys.Load().lookup(r.Authorization)
}

// requireKey answers a request without a valid key: 400 when it sent
// several Authorization fields (which one a proxy in front would pass on
// is anyone's guess, so none is taken), else 401.
func (s *Server) requireKey(x *exchange) bool {
	if x.Authorizations > 1 {
		x.fail(fail(failAmbiguousAuth))
		return false
	}
	if x.principal == nil {
		// RFC 6750 section 3: a 401 names the scheme it wants.
		x.SetHeader("WWW-Authenticate", `Bearer realm="tradergate"`)
		x.fail(fail(failUnauthorized))
		return false
	}
	return true
}
