package proxy

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"tradergate/proxy/admin"
	"tradergate/proxy/config"
	"tradergate/proxy/route"
)

// The legacy paths at the edge: GET /open-api/v1/... answered in variant B
// as the legacy host answers it, so that clients not yet moved to /v1 can
// point at the edge on day one. Every such answer says the API is
// deprecated (RFC 9745), when it ends (RFC 8594) and what replaces the
// resource; once retired (past the sunset, during a brownout, or for a
// key marked retired) it is 410 Gone. docs/OPERATING.md "Migrating clients" has the
// steps. Who still calls them is counted by proxy/migration.

// legacyPolicy is the legacy section as the steps read it: made once per
// (re)load, read by every legacy request, never written.
type legacyPolicy struct {
	enabled     bool
	deprecation string    // the Deprecation value, "@<unix seconds>"
	sunset      time.Time // zero: none
	sunsetValue string    // the Sunset value, an HTTP-date
	links       string    // rel="deprecation" and rel="sunset" links; "" when none
	guide       string
	brownouts   []window
}

type window struct{ start, end time.Time }

func newLegacyPolicy(c config.LegacyConfig) *legacyPolicy {
	deprecation, sunset := c.Times()
	p := &legacyPolicy{enabled: c.Enabled, sunset: sunset, guide: c.GuideURL}
	if !deprecation.IsZero() {
		// RFC 9745 section 2.1: a Structured Field Date.
		p.deprecation = "@" + strconv.FormatInt(deprecation.Unix(), 10)
	}
	if !sunset.IsZero() {
		// RFC 8594 section 3: an HTTP-date.
		p.sunsetValue = sunset.UTC().Format(http.TimeFormat)
	}
	if c.GuideURL != "" {
		// RFC 9745 section 3: rel="deprecation" points at what tells a
		// client about the deprecation. RFC 8594 section 6: rel="sunset"
		// identifies a resource that provides information about the
		// retirement (policy, timeline): the same guide, and only where
		// a sunset is set. It never points at the successor, which has
		// its own relation.
		p.links = "<" + c.GuideURL + `>; rel="deprecation"`
		if !sunset.IsZero() {
			p.links += ", <" + c.GuideURL + `>; rel="sunset"`
		}
	}
	for _, b := range c.Brownouts {
		start := b.StartTime()
		p.brownouts = append(p.brownouts, window{start, start.Add(b.Duration)})
	}
	slices.SortFunc(p.brownouts, func(a, b window) int { return a.start.Compare(b.start) })
	return p
}

// legacyAPI marks a request on the legacy paths, so that every answer to
// it, refusals included, is variant B, and gives it the deprecation
// headers. It runs before authentication: a 401 or a 429 there must be
// variant B too.
//
// Every answer on a legacy path links its successor (docs/CONTRACT.md
// "Legacy paths"): here the /v1 path of the same resource, which is all a
// request not yet validated has; retire replaces it with the canonical
// request once the request is valid.
func (s *Server) legacyAPI(x *exchange) {
	p := s.legacy.Load()
	if !p.enabled || !strings.HasPrefix(x.Path, route.LegacyPrefix+"/") {
		return
	}
	x.legacy = true
	if p.deprecation != "" {
		x.SetHeader("Deprecation", p.deprecation)
	}
	if p.sunsetValue != "" {
		x.SetHeader("Sunset", p.sunsetValue)
	}
	link := p.links
	if !x.TargetCut {
		link = successorLink(appendLinkTarget(make([]byte, 0, len(x.Path)+64), x.Path[len(route.LegacyPrefix):]), p.links)
	}
	if link != "" {
		x.SetHeader("Link", link)
	}
}

// migrate counts the request of a key by API (proxy/migration), and, on a
// legacy path, links the /v1 successor and refuses it with 410 once
// retired there (retire). It runs once the request is valid.
func (s *Server) migrate(x *exchange) bool {
	// A principal belongs to one Server's key set, and the Server's
	// counts live as long as it: the remembered pointer never goes stale.
	k := x.principal.use.Load()
	if k == nil {
		k = s.migration.Key(x.principal.KeyID)
		x.principal.use.Store(k)
	}
	k.Count(x.route.Index(), x.legacy, x.now)
	if !x.legacy {
		return true
	}
	return s.retire(x)
}

// retire answers 410 to a legacy request once that API is retired for it,
// and links every legacy answer to the /v1 request that serves the same
// data. It runs once the request is valid: the successor is its canonical
// form.
func (s *Server) retire(x *exchange) bool {
	p := s.legacy.Load()
	successor := x.req.SuccessorPath()
	x.SetHeader("Link", successorLink([]byte(successor), p.links))
	var why string
	switch {
	case !p.sunset.IsZero() && !x.now.Before(p.sunset):
		why = "This API was retired on " + p.sunset.UTC().Format(time.RFC3339)
	case x.principal.legacyRetired:
		why = "This API is retired for this API key"
	default:
		for _, w := range p.brownouts {
			if !x.now.Before(w.start) && x.now.Before(w.end) {
				why = "This API is unavailable during a scheduled brownout until " +
					w.end.UTC().Format(time.RFC3339) + ", ahead of its retirement"
				break
			}
		}
	}
	if why == "" {
		return true
	}
	x.fail(&edgeError{kind: failLegacyRetired, message: why + "; use " + successor + " instead"})
	return false
}

// serveMigration answers GET /migration on the admin listener: the
// report of the running configuration (proxy/migration).
func (s *Server) serveMigration(w http.ResponseWriter, r *http.Request) {
	b, err := json.Marshal(s.migration.Report(r.Context(), s.live.Load()))
	if err != nil {
		admin.WriteJSON(w, http.StatusInternalServerError, `{"status":"error"}`)
		return
	}
	admin.WriteJSON(w, http.StatusOK, strings.TrimSpace(string(b)))
}

// successorLink is the Link value naming target as the successor
// version, followed by the guide's links, if any.
func successorLink(target []byte, links string) string {
	b := append([]byte("<"), target...)
	b = append(b, `>; rel="successor-version"`...)
	if links != "" {
		b = append(b, ", "...)
		b = append(b, links...)
	}
	return string(b)
}

// appendLinkTarget appends path as it may stand between < and > in a Link
// (RFC 8288 section 3): the characters of a URI path as they are, any
// other byte percent-encoded, so that a client's path can never end the
// reference or split the field.
func appendLinkTarget(b []byte, path string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			strings.IndexByte("-._~!$&'()*+,;=:@/%", c) >= 0:
			b = append(b, c)
		default:
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return b
}
