package history

import (
	"slices"
	"strconv"
	"time"
	"unique"

	"github.com/cespare/xxhash/v2"

	"tradergate/legacysim"
	"tradergate/normalize"
	"tradergate/proxy/route"
)

// Version is one answer of the legacy host to an upstream request, in
// variant A: the truth an edge answer is held to.
type Version struct {
	At        time.Time // when the legacy host made it (its data is as of At)
	Hash      uint64    // xxHash of Body: what the edge's ETag names (cache/entry.go)
	Body      string    // the rewrite of the legacy body
	RequestID string    // the request id the edge sent with it
	// DataNull: a lookup that found nothing (normalize.Meta.DataNull),
	// which the cache keeps for its negative TTL.
	DataNull bool
}

// Truth is what the legacy host answered, by upstream request: each 200
// of its journal (legacysim.Answer) rewritten into variant A by the
// edge's own rewrite (normalize.Rewrite, with the options the edge's
// upstream client gives it), so that "the variant A rewrite of an answer
// the legacy host gave" is computed, not assumed. Answers cut short, and
// those the rewrite refuses (which the edge must not serve), are no
// truth.
type Truth struct {
	versions map[string][]Version // upstream target -> versions by At
	unknown  int                  // journal answers on no route
}

// NewTruth reads the journal. shiftCents is upstream.price_scale: cents.
func NewTruth(routes *route.Table, journal []legacysim.Answer, shiftCents bool) *Truth {
	t := &Truth{versions: map[string][]Version{}}
	type memoKey struct {
		route *route.Route
		body  string
	}
	type memoVal struct {
		ok, null bool
		hash     uint64
		body     string
	}
	memo := map[memoKey]memoVal{}
	for _, a := range journal {
		if a.Status != 200 || a.Cut {
			continue
		}
		rt, _ := routes.MatchLegacy(a.Path)
		if rt == nil {
			t.unknown++
			continue
		}
		k := memoKey{rt, a.Body}
		v, ok := memo[k]
		if !ok {
			opt := normalize.Options{Shape: rt.Shape, ShiftCents: shiftCents, TimeField: rt.TimeField}
			out, meta, err := normalize.Rewrite(nil, []byte(a.Body), opt)
			v.ok, v.null = err == nil, meta.DataNull
			if v.ok {
				v.hash = xxhash.Sum64(out)
				v.body = unique.Make(string(out)).Value()
			}
			memo[k] = v
		}
		if !v.ok {
			continue
		}
		target := upstreamTarget(a.Path, a.Query)
		t.versions[target] = append(t.versions[target], Version{At: a.At, Hash: v.hash, Body: v.body, RequestID: a.RequestID, DataNull: v.null})
	}
	for _, vs := range t.versions {
		slices.SortStableFunc(vs, func(a, b Version) int { return a.At.Compare(b.At) })
	}
	return t
}

// Versions returns the truth of an upstream target, by time.
func (t *Truth) Versions(target string) []Version { return t.versions[target] }

// Targets is how many upstream targets have a truth.
func (t *Truth) Targets() int { return len(t.versions) }

func upstreamTarget(path, rawQuery string) string {
	if rawQuery == "" {
		return path
	}
	return path + "?" + rawQuery
}

// etagHash reads the hash an ETag names, and whether it names the gzip
// representation; ok is false for a tag not in the edge's form.
func etagHash(tag string) (hash uint64, gz, ok bool) {
	if len(tag) < 2 || tag[0] != '"' || tag[len(tag)-1] != '"' {
		return 0, false, false
	}
	s := tag[1 : len(tag)-1]
	if len(s) == 16+len("-gzip") && s[16:] == "-gzip" {
		s, gz = s[:16], true
	}
	if len(s) != 16 {
		return 0, false, false
	}
	h, err := strconv.ParseUint(s, 16, 64)
	return h, gz, err == nil
}
