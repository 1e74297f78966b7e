package proxy

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"tradergate/cache/configerr"
	"tradergate/proxy/route"
)

// The legacy paths at the edge: GET /open-api/v1/... answered in variant B
// as the legacy host answers it, so that clients not yet moved to /v1 can
// point at the edge on day one. Every such answer says the API is
// deprecated (RFC 9745), when it ends (RFC 8594) and what replaces the
// resource; once retired (past the sunset, during a brownout, or for a
// key marked retired) it is 410 Gone. docs/OPERATING.md "Migrating clients" has the
// steps.

// LegacyConfig is the legacy section. Everything in it is reloaded on
// SIGHUP.
type LegacyConfig struct {
	// Enabled serves the legacy paths (/open-api/v1/...) at the edge; zero:
	// off, and those paths are 404 as any unknown path.
	Enabled bool `yaml:"enabled"`
	// Deprecation is when the legacy API was (or will be) deprecated, RFC
	// 3339, sent as the Deprecation header. Required when Enabled.
	Deprecation string `yaml:"deprecation"`
	// Sunset is when the legacy paths stop answering, RFC 3339: from then
	// on every legacy call is 410. Zero: no date set (no Sunset header).
	// Not before Deprecation.
	Sunset string `yaml:"sunset"`
	// GuideURL is the migration guide, an absolute http(s) URL, linked as
	// rel="deprecation" (and rel="sunset" once a sunset is set); zero: no
	// such links.
	GuideURL string `yaml:"guide_url"`
	// Brownouts are scheduled windows in which legacy calls are already
	// 410, so that clients notice before the sunset; zero: none.
	Brownouts []Brownout `yaml:"brownouts"`

	// Parsed by validate.
	deprecation, sunset time.Time
}

// Brownout is one scheduled window of 410s.
type Brownout struct {
	// Start is RFC 3339. Required.
	Start string `yaml:"start"`
	// Duration is how long it lasts. Required, positive.
	Duration time.Duration `yaml:"duration"`

	start time.Time
}

// The values of keys[].legacy.
const (
	legacyAllow   = "allow"
	legacyRetired = "retired"
)

// validate reports every problem of the legacy section and of the keys'
// legacy fields, each naming its field path. It parses the times.
func (c *LegacyConfig) validate(keys []KeyConfig) error {
	var errs configerr.List
	add := func(field, msg string) { errs.Add("legacy."+field, "%s", msg) }
	parse := func(field, v string, into *time.Time) bool {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			add(field, "must be an RFC 3339 time such as 2026-12-01T00:00:00Z, got \""+v+"\"")
			return false
		}
		*into = t
		return true
	}
	switch {
	case c.Deprecation != "":
		parse("deprecation", c.Deprecation, &c.deprecation)
	case c.Enabled:
		add("deprecation", "is required when legacy.enabled is true: the Deprecation header states it")
	}
	if c.Sunset != "" && parse("sunset", c.Sunset, &c.sunset) && !c.deprecation.IsZero() && c.sunset.Before(c.deprecation) {
		add("sunset", "must not be before legacy.deprecation ("+c.Deprecation+")")
	}
	if c.GuideURL != "" {
		u, err := url.Parse(c.GuideURL)
		// It goes between < and > in a Link header: nothing there may end
		// or split the field.
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.ContainsAny(c.GuideURL, "<>\" \t\r\n") {
			add("guide_url", "must be an absolute http or https URL, got \""+c.GuideURL+"\"")
		}
	}
	for i := range c.Brownouts {
		b := &c.Brownouts[i]
		f := "brownouts[" + strconv.Itoa(i) + "]"
		if b.Start == "" {
			add(f+".start", "is required (RFC 3339)")
		} else {
			parse(f+".start", b.Start, &b.start)
		}
		if b.Duration <= 0 {
			add(f+".duration", "must be positive, got "+b.Duration.String())
		}
	}
	for i, k := range keys {
		if k.Legacy != "" && k.Legacy != legacyAllow && k.Legacy != legacyRetired {
			errs.Add("keys["+strconv.Itoa(i)+"].legacy", "must be allow or retired, got %q", k.Legacy)
		}
	}
	return errs.Err()
}

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

func newLegacyPolicy(c LegacyConfig) *legacyPolicy {
	p := &legacyPolicy{enabled: c.Enabled, sunset: c.sunset, guide: c.GuideURL}
	if !c.deprecation.IsZero() {
		// RFC 9745 section 2.1: a Structured Field Date.
		p.deprecation = "@" + strconv.FormatInt(c.deprecation.Unix(), 10)
	}
	if !c.sunset.IsZero() {
		// RFC 8594 section 3: an HTTP-date.
		p.sunsetValue = c.sunset.UTC().Format(http.TimeFormat)
	}
	if c.GuideURL != "" {
		// RFC 9745 section 3: rel="deprecation" points at what tells a
		// client about the deprecation. RFC 8594 section 6: rel="sunset"
		// identifies a resource that provides information about the
		// retirement (policy, timeline): the same guide, and only where
		// a sunset is set. It never points at the successor, which has
		// its own relation.
		p.links = "<" + c.GuideURL + `>; rel="deprecation"`
		if !c.sunset.IsZero() {
			p.links += ", <" + c.GuideURL + `>; rel="sunset"`
		}
	}
	for _, b := range c.Brownouts {
		p.brownouts = append(p.brownouts, window{b.start, b.start.Add(b.Duration)})
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
	p := s.migration.policy.Load()
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
