package route

import (
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unsafe"
)

// Edge validation (docs/CONTRACT.md "Routes", "Limits"). Every rule is
// checked before any upstream call, and the validated request is rewritten
// into one canonical form: that form is what goes upstream and what keys the
// cache, so two requests that mean the same share one entry
// (docs/ARCHITECTURE.md "Cache keys").

// kind is the rule family of a query parameter.
type kind uint8

const (
	// kindList is a multi-value filter: comma-separated, repeated, or both.
	// Values combine with OR (docs/CONTRACT.md "Order book events"), so the canonical form
	// is sorted and without duplicates.
	kindList kind = iota + 1
	// kindInt is a non-negative int64: a block height or a timestamp.
	kindInt
	// kindEnum is one value of enum, matched case-insensitively.
	kindEnum
	// kindTxHash is a 32-byte 0x hex hash, lower-cased.
	kindTxHash
	// kindDecimal is a non-negative decimal string (minAmount).
	kindDecimal
	// kindCursor is an opaque cursor, passed back unmodified
	// (docs/CONTRACT.md "Conventions").
	kindCursor
	// kindPageSize is the page size; always sent upstream, so the legacy
	// host's own defaults never apply.
	kindPageSize
)

// bound says whether a kindInt parameter bounds a range; the upper bound is
// what lets the cache call a page settled (docs/ARCHITECTURE.md "Cache
// policy").
type bound uint8

const (
	boundNone bound = iota
	boundLower
	boundUpper
)

// param is one known query parameter of a route.
type param struct {
	name string
	kind kind
	// max is the most values of a kindList (zero: no limit) or the largest
	// kindPageSize; min the smallest kindPageSize.
	max, min int
	// fold lower-cases the values of a case-insensitive kindList.
	fold bool
	// enum lists the allowed values of a kindEnum or kindList (nil: any).
	enum []string
	// def is sent for an absent kindEnum ("" sends nothing).
	def string
	// defInt is the kindPageSize used when absent.
	defInt int
	// defText and maxText are defInt and max as text (NewTable fills
	// them), so that a canonical page size never needs formatting.
	defText, maxText string
	// cap caps a kindPageSize above max instead of refusing it (activity).
	cap bool
	// legacyDef is the legacy host's own default of a kindPageSize, when it
	// differs from defInt (activity: 50): a request on the legacy path that
	// leaves the page size out gets the page the legacy host would answer.
	legacyDef     int
	legacyDefText string
	// bound marks a kindInt as the lower or upper end of a range; block says
	// the range is in block heights, not time.
	bound bound
	block bool
}

// Limits on opaque values, so that a hostile query cannot make the edge key
// or forward arbitrarily large strings. Generous next to real identifiers.
const (
	maxValueLen  = 128
	maxCursorLen = 1024
)

// maxParams is the most query parameters a route knows (the order book's
// nine), so that a query needs no allocation of its own.
const maxParams = 10

// query is the validated, canonical query of one request.
type query struct {
	route *Route
	vals  [maxParams]string // canonical value per route.params index; "" when absent
	ints  [maxParams]int64  // parsed value of kindInt and kindPageSize parameters
}

// value returns the canonical value of the named parameter ("" when absent).
func (q *query) value(name string) string {
	if i := q.index(name); i >= 0 {
		return q.vals[i]
	}
	return ""
}

// intValue returns the integer value of a kindInt or kindPageSize parameter.
func (q *query) intValue(name string) (int64, bool) {
	if i := q.index(name); i >= 0 && q.vals[i] != "" {
		return q.ints[i], true
	}
	return 0, false
}

func (q *query) index(name string) int { return q.route.paramIndex(name) }

// Request is a validated request: everything later steps need, and nothing
// that came from the client unchecked.
type Request struct {
	Route *Route
	// PathParam is the canonical (lower-cased) address or hash; "" when the
	// route has none.
	PathParam string
	query     query
	// Legacy is true for a request that came in on the legacy path
	// (LegacyPrefix + Pattern): it is answered in variant B, as the legacy
	// host sends it, and cached apart from its /v1 twin.
	Legacy bool
	// RawQuery is the canonical query string sent upstream.
	RawQuery string
	// Key is the cache key: route, path parameter and canonical query.
	Key string
	// Cursor is true when the request names a page by cursor.
	Cursor bool
	// Upper is the request's upper bound, when it has one (HasUpper), in the
	// route's time unit, or in blocks when UpperIsBlock.
	Upper        int64
	HasUpper     bool
	UpperIsBlock bool

	// keyBuf holds Key when it fits, so that validating a request makes
	// no allocation. A Request is therefore used through its pointer and
	// never copied but by Own, and not validated again while anything
	// holds its Key.
	keyBuf [160]byte
	// owned: the request's memory is its own and never written again
	// (Own).
	owned bool
}

// Param is the canonical value of the named query parameter ("" when
// absent).
func (r *Request) Param(name string) string { return r.query.value(name) }

// IntParam is the value of an integer query parameter, and whether it was
// given (a page size always is).
func (r *Request) IntParam(name string) (int64, bool) { return r.query.intValue(name) }

// SuccessorPath is the /v1 path and canonical query that serve the same
// data as the request: what a client of the legacy path should call
// instead (cursor and page size included).
func (r *Request) SuccessorPath() string {
	p := r.Route.Pattern
	if r.PathParam != "" {
		i, j := strings.IndexByte(p, '{'), strings.IndexByte(p, '}')
		p = p[:i] + r.PathParam + p[j+1:]
	}
	if r.RawQuery == "" {
		return p
	}
	return p + "?" + r.RawQuery
}

// UpstreamPath is the legacy path of the request, below upstream.base_url.
func (r *Request) UpstreamPath() string {
	before, param, after := r.upstreamPath()
	if param == "" {
		return before
	}
	return before + param + after
}

// AppendUpstreamURL appends base, then the legacy path and the query of
// the request (UpstreamPath, RawQuery), to dst: the URL the legacy call
// asks for, written into the caller's buffer.
func (r *Request) AppendUpstreamURL(dst []byte, base string) []byte {
	before, param, after := r.upstreamPath()
	dst = append(append(append(append(dst, base...), before...), param...), after...)
	if r.RawQuery == "" {
		return dst
	}
	return append(append(dst, '?'), r.RawQuery...)
}

// upstreamPath is the legacy path in its parts: the route's legacy path
// before its {parameter}, the parameter's value, and the rest; all of it
// in before when the route has no parameter.
func (r *Request) upstreamPath() (before, param, after string) {
	if r.PathParam == "" {
		return r.Route.Legacy, "", ""
	}
	i := strings.IndexByte(r.Route.Legacy, '{')
	j := strings.IndexByte(r.Route.Legacy, '}')
	return r.Route.Legacy[:i], r.PathParam, r.Route.Legacy[j+1:]
}

// Validate checks the path parameter and query of a request to route and
// returns its canonical form, or an *Error.
func (rt *Route) Validate(pathParam, rawQuery string) (*Request, error) {
	req := &Request{}
	if err := rt.ValidateInto(req, pathParam, rawQuery); err != nil {
		return nil, err
	}
	return req, nil
}

// ValidateInto is Validate into a Request the caller owns (the edge keeps
// one in each request's state, so a cache hit does not allocate it).
func (rt *Route) ValidateInto(req *Request, pathParam, rawQuery string) error {
	return rt.validateInto(req, pathParam, rawQuery, false)
}

// ValidateLegacyInto is ValidateInto for the route's legacy path: the same
// rules and canonical form, the request marked Legacy and its cache key in
// a key space of its own, so that a variant B body is never served for a
// /v1 request nor the reverse.
func (rt *Route) ValidateLegacyInto(req *Request, pathParam, rawQuery string) error {
	return rt.validateInto(req, pathParam, rawQuery, true)
}

// legacyKeyPrefix starts the cache key of a legacy request. No route name
// starts with it, so the two key spaces cannot meet.
const legacyKeyPrefix = "B:"

func (rt *Route) validateInto(req *Request, pathParam, rawQuery string, legacy bool) error {
	*req = Request{Route: rt, Legacy: legacy}
	switch rt.path {
	case pathAddress:
		p, ok := lowerHex(pathParam, 40)
		if !ok {
			return invalid(msgInvalidAddress)
		}
		req.PathParam = p
	case pathTxHash:
		p, ok := lowerHex(pathParam, 64)
		if !ok {
			return invalid(msgInvalidTxHash)
		}
		req.PathParam = p
	}

	pairs, err := rt.splitQuery(rawQuery, make([]pair, 0, 16))
	if err != nil {
		return err
	}
	q := &req.query
	q.route = rt
	for i := range rt.params {
		p := &rt.params[i]
		if err := p.canonical(pairs, i, &q.vals[i], &q.ints[i]); err != nil {
			return err
		}
		if legacy && p.legacyDef != 0 && q.vals[i] == p.defText && !given(pairs, i) {
			q.vals[i], q.ints[i] = p.legacyDefText, int64(p.legacyDef)
		}
		if q.vals[i] == "" {
			continue
		}
		switch {
		case p.kind == kindCursor:
			req.Cursor = true
		case p.kind == kindInt && p.bound == boundUpper:
			// Two upper bounds (activity's toBlock and toTimestamp): the
			// time bound is the one the settle window can judge.
			if !req.HasUpper || req.UpperIsBlock {
				req.Upper, req.HasUpper, req.UpperIsBlock = q.ints[i], true, p.block
			}
		}
	}
	if rt.check != nil {
		if err := rt.check(q); err != nil {
			return err
		}
	}
	// The key ends with the canonical query: one string holds both.
	keyPrefix := ""
	if legacy {
		keyPrefix = legacyKeyPrefix
	}
	prefix := len(keyPrefix) + len(rt.Name) + 1 + len(req.PathParam) + 1
	// Made in the request's own memory when it fits (see Request), and
	// never written again: the unsafe.String is sound for as long as the
	// request is not validated again.
	key := q.appendKey(req.keyBuf[:0], keyPrefix, rt.Name, req.PathParam)
	req.Key = unsafe.String(unsafe.SliceData(key), len(key))
	req.RawQuery = req.Key[prefix:]
	return nil
}

// CheckQuery checks a query string as every route's validation does,
// for a path with no parameters of its own: a semicolon or a broken
// escape is 400 Invalid query string; the parameters themselves are
// ignored.
func CheckQuery(rawQuery string) error {
	_, err := noParams.splitQuery(rawQuery, nil)
	return err
}

// noParams is a route that knows no parameter (CheckQuery).
var noParams Route

// pair is one known parameter of a query string: its index in the route's
// params and its unescaped value.
type pair struct {
	i int
	v string
}

// splitQuery is url.ParseQuery without the map: it appends the values of
// the route's own parameters to pairs, in order; unknown names are dropped
// here.
// Semicolons are refused as ParseQuery refuses them (Go 1.17), so that no
// proxy in front can read the query differently from the edge.
func (rt *Route) splitQuery(s string, pairs []pair) ([]pair, error) {
	for s != "" {
		var kv string
		kv, s, _ = strings.Cut(s, "&")
		if kv == "" {
			continue
		}
		if strings.IndexByte(kv, ';') >= 0 {
			return nil, errInvalidQuery
		}
		key, value, _ := strings.Cut(kv, "=")
		key, err := unescape(key)
		if err != nil {
			return nil, errInvalidQuery
		}
		i := rt.paramIndex(key)
		if value, err = unescape(value); err != nil {
			// Unknown parameters are dropped, but a broken escape
			// anywhere is still a broken query.
			return nil, errInvalidQuery
		}
		if i >= 0 {
			pairs = append(pairs, pair{i, value})
		}
	}
	return pairs, nil
}

// given reports whether parameter i has a non-empty value among pairs.
func given(pairs []pair, i int) bool {
	for _, pr := range pairs {
		if pr.i == i && pr.v != "" {
			return true
		}
	}
	return false
}

func (rt *Route) paramIndex(name string) int {
	for i := range rt.params {
		if rt.params[i].name == name {
			return i
		}
	}
	return -1
}

// unescape is url.QueryUnescape, without its allocation when there is
// nothing to unescape (the common case).
func unescape(s string) (string, error) {
	if strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '+') < 0 {
		return s, nil
	}
	return url.QueryUnescape(s)
}

// canonical validates the values of parameter i among pairs and stores its
// canonical value (and integer, where it has one).
func (p *param) canonical(pairs []pair, i int, val *string, num *int64) error {
	if p.kind == kindList {
		return p.canonicalList(pairs, i, val)
	}
	// Empty values count as absent: `?limit=` is a client that filled in
	// nothing, not a client that asked for a page of zero.
	v := ""
	for _, pr := range pairs {
		if pr.i != i || pr.v == "" {
			continue
		}
		if v != "" {
			return invalid("Invalid " + p.name + ": given more than once")
		}
		v = pr.v
	}
	switch p.kind {
	case kindInt:
		if v == "" {
			return nil
		}
		n, ok := parseDigits(v)
		if !ok {
			return invalid("Invalid " + p.name + ": must be a non-negative integer")
		}
		*val, *num = v, n
	case kindPageSize:
		if v == "" {
			// A size with no default (the book's depth) stays absent, so
			// that the canonical form never carries a value the rules
			// refuse.
			if p.defInt != 0 {
				*val, *num = p.defText, int64(p.defInt)
			}
			return nil
		}
		n, ok := parseDigits(v)
		if !ok || n < int64(p.min) || (n > int64(p.max) && !p.cap) {
			return invalid("Invalid " + p.name + ": must be an integer from " +
				strconv.Itoa(p.min) + " to " + strconv.Itoa(p.max))
		}
		if n > int64(p.max) {
			*val, *num = p.maxText, int64(p.max)
			return nil
		}
		*val, *num = v, n
	case kindEnum:
		if v == "" {
			*val = p.def
			return nil
		}
		j := slices.IndexFunc(p.enum, func(e string) bool { return strings.EqualFold(e, v) })
		if j < 0 {
			return invalid("Invalid " + p.name + ": must be " + strings.Join(p.enum, " or "))
		}
		*val = p.enum[j]
	case kindTxHash:
		if v == "" {
			return nil
		}
		lv, ok := lowerHex(v, 64)
		if !ok {
			return invalid(msgInvalidTxHash)
		}
		*val = lv
	case kindDecimal:
		if v == "" {
			return nil
		}
		if !isDecimal(v) {
			return invalid("Invalid " + p.name + ": must be a non-negative decimal")
		}
		*val = v
	case kindCursor:
		if v == "" {
			return nil
		}
		if len(v) > maxCursorLen || !printable(v) {
			return invalid("Invalid cursor")
		}
		*val = v
	}
	return nil
}

// parseDigits reads a non-negative integer written as the contract writes
// numbers: digits only, no sign, no leading zero (but "0" itself), at most
// the largest int64, 9223372036854775807 (docs/openapi.json gives every
// integer parameter format int64; docs/CONTRACT.md "Query parameters"). Anything
// else is refused rather than read generously, so that the edge and
// whatever is in front of it never read one value two ways; and the
// canonical form is then the text as given.
func parseDigits(s string) (int64, bool) {
	if s == "" || len(s) > maxInt64Digits || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, false // past the largest int64
		}
		n = n*10 + d
	}
	return n, true
}

// maxInt64Digits is the length of the largest int64 in base 10.
const maxInt64Digits = 19

func (p *param) canonicalList(pairs []pair, i int, val *string) error {
	var buf [8]string
	items := buf[:0]
	for _, pr := range pairs {
		if pr.i != i {
			continue
		}
		for item := range strings.SplitSeq(pr.v, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			if p.fold {
				item = strings.ToLower(item)
			}
			if p.enum != nil {
				if !slices.Contains(p.enum, item) {
					return invalid("Invalid " + p.name + ": values must be " + strings.Join(p.enum, " or "))
				}
			} else if len(item) > maxValueLen || !isIdent(item) {
				return invalid("Invalid " + p.name + " value")
			}
			items = append(items, item)
			// The limit counts values as given (docs/CONTRACT.md
			// "Limits"), before duplicates are folded away.
			if p.max > 0 && len(items) > p.max {
				return invalid("Too many " + p.name + " values: at most " + strconv.Itoa(p.max))
			}
		}
	}
	switch len(items) {
	case 0:
		return nil
	case 1:
		*val = items[0]
		return nil
	}
	slices.Sort(items)
	items = slices.Compact(items)
	*val = strings.Join(items, ",")
	return nil
}

// appendKey appends the cache key to dst: the route name, the path
// parameter and the canonical query (known parameters in table order,
// lists comma-joined with each element escaped, nothing else).
func (q *query) appendKey(dst []byte, keyPrefix, name, pathParam string) []byte {
	b := append(dst, keyPrefix...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, pathParam...)
	b = append(b, '?')
	first := true
	for i, p := range q.route.params {
		v := q.vals[i]
		if v == "" {
			continue
		}
		if !first {
			b = append(b, '&')
		}
		first = false
		b = append(b, p.name...)
		b = append(b, '=')
		if p.kind == kindList {
			for j, item := 0, ""; v != ""; j++ {
				item, v, _ = strings.Cut(v, ",")
				if j > 0 {
					b = append(b, ',')
				}
				b = appendEscaped(b, item)
			}
			continue
		}
		b = appendEscaped(b, v)
	}
	return b
}

// appendEscaped appends url.QueryEscape(s), without its allocation when
// nothing needs escaping.
func appendEscaped(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || c == '_' || c == '.' || c == '~') {
			return append(b, url.QueryEscape(s)...)
		}
	}
	return append(b, s...)
}

// checkOrderBook holds the cross-parameter rules of the order book events
// route (docs/CONTRACT.md "Order book events").
func checkOrderBook(q *query) error {
	if q.value("marketId") == "" && q.value("conditionId") == "" && q.value("tokenId") == "" {
		return invalid(msgFilterRequired)
	}
	return checkRange(q, "from", "to")
}

// checkBook: the order book route rebuilds one token's book.
func checkBook(q *query) error {
	if q.value("tokenId") == "" {
		return invalid("tokenId is required")
	}
	return nil
}

// checkRanges refuses inverted ranges. The contract states `to >= from` for the
// order book only; an inverted block or timestamp range elsewhere can only
// ever return nothing, so the edge says so instead (docs/CONTRACT.md "Assumptions").
func checkRanges(pairs ...string) func(q *query) error {
	return func(q *query) error {
		for i := 0; i+1 < len(pairs); i += 2 {
			if err := checkRange(q, pairs[i], pairs[i+1]); err != nil {
				return err
			}
		}
		return nil
	}
}

func checkRange(q *query, lo, hi string) error {
	from, okFrom := q.intValue(lo)
	to, okTo := q.intValue(hi)
	if okFrom && okTo && to < from {
		return invalid("Invalid range: " + hi + " must be >= " + lo)
	}
	return nil
}

// lowerHex reports whether s is "0x" followed by n hex digits (either
// case), and returns it in lower case: s itself when it already is (the
// usual case, which strings.ToLower would scan a second time).
func lowerHex(s string, n int) (string, bool) {
	if len(s) != n+2 || s[0] != '0' || s[1] != 'x' {
		return "", false
	}
	upper := false
	for i := 2; i < len(s); i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9' || 'a' <= c && c <= 'f':
		case 'A' <= c && c <= 'F':
			upper = true
		default:
			return "", false
		}
	}
	if upper {
		return strings.ToLower(s), true
	}
	return s, true
}

// isDecimal accepts digits with at most one interior point: "10", "0.5".
func isDecimal(s string) bool {
	if len(s) > 40 {
		return false
	}
	dot := -1
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.' && dot < 0 && i > 0 && i < len(s)-1:
			dot = i
		case c < '0' || c > '9':
			return false
		}
	}
	return s != ""
}

// isIdent accepts the characters of market, condition and token
// identifiers (digits, letters, 0x prefixes, slugs).
func isIdent(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// printable refuses control characters and non-ASCII bytes in an opaque
// value; cursors are base64 (docs/CONTRACT.md "Conventions").
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
