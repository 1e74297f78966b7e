package config

import (
	"net/url"
	"strconv"
	"strings"
	"time"
	"tradergate/cache/configerr"
)

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
	LegacyAllow   = "allow"
	LegacyRetired = "retired"
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
		if k.Legacy != "" && k.Legacy != LegacyAllow && k.Legacy != LegacyRetired {
			errs.Add("keys["+strconv.Itoa(i)+"].legacy", "must be allow or retired, got %q", k.Legacy)
		}
	}
	return errs.Err()
}

// Times are legacy.deprecation and legacy.sunset as Validate parsed
// them; zero: not set.
func (c *LegacyConfig) Times() (deprecation, sunset time.Time) { return c.deprecation, c.sunset }

// StartTime is start as Validate parsed it.
func (b *Brownout) StartTime() time.Time { return b.start }
