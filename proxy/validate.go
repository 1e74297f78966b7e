package proxy

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Edge validation (SPEC "Endpoints", "Limits", "Errors" 400). Every rule is
// checked before any upstream call, and the validated request is rewritten
// into one canonical form: that form is what goes upstream and what keys the
// cache, so two requests that mean the same share one entry (DESIGN.md).

// Kind is the rule family of a query parameter.
type Kind uint8

const (
	// KindList is a multi-value filter: comma-separated, repeated, or both.
	// Values combine with OR (SPEC endpoint 1 rule 2), so the canonical form
	// is sorted and without duplicates.
	KindList Kind = iota + 1
	// KindInt is a non-negative int64: a block height or a timestamp.
	KindInt
	// KindEnum is one value of Enum, matched case-insensitively.
	KindEnum
	// KindTxHash is a 32-byte 0x hex hash, lower-cased.
	KindTxHash
	// KindDecimal is a non-negative decimal string (minAmount).
	KindDecimal
	// KindCursor is an opaque cursor, passed back unmodified (SPEC
	// "Conventions").
	KindCursor
	// KindPageSize is the page size; always sent upstream, so the legacy
	// host's own defaults never apply.
	KindPageSize
)

// Bound says whether a KindInt parameter bounds a range; the upper bound is
// what lets the cache call a page settled (DESIGN.md "Immutable vs fresh").
type Bound uint8

const (
	BoundNone Bound = iota
	BoundLower
	BoundUpper
)

// Param is one known query parameter of a route.
type Param struct {
	Name string
	Kind Kind
	// Max is the most values of a KindList (zero: no limit) or the largest
	// KindPageSize; Min the smallest KindPageSize.
	Max, Min int
	// Fold lower-cases the values of a case-insensitive KindList.
	Fold bool
	// Enum lists the allowed values of a KindEnum or KindList (nil: any).
	Enum []string
	// Default is sent for an absent KindEnum ("" sends nothing).
	Default string
	// DefaultInt is the KindPageSize used when absent.
	DefaultInt int
	// Cap caps a KindPageSize above Max instead of refusing it (activity).
	Cap bool
	// Bound marks a KindInt as the lower or upper end of a range; Block says
	// the range is in block heights, not time.
	Bound Bound
	Block bool
}

// Limits on opaque values, so that a hostile query cannot make the edge key
// or forward arbitrarily large strings. Generous next to real identifiers.
const (
	maxValueLen  = 128
	maxCursorLen = 1024
)

// maxParams is the most query parameters a route knows (the order book's
// nine), so that a Query needs no allocation of its own.
const maxParams = 10

// Query is the validated, canonical query of one request.
type Query struct {
	route *Route
	vals  [maxParams]string // canonical value per route.Params index; "" when absent
	ints  [maxParams]int64  // parsed value of KindInt and KindPageSize parameters
}

// Value returns the canonical value of the named parameter ("" when absent).
func (q *Query) Value(name string) string {
	if i := q.index(name); i >= 0 {
		return q.vals[i]
	}
	return ""
}

// Int returns the integer value of a KindInt or KindPageSize parameter.
func (q *Query) Int(name string) (int64, bool) {
	if i := q.index(name); i >= 0 && q.vals[i] != "" {
		return q.ints[i], true
	}
	return 0, false
}

func (q *Query) index(name string) int { return q.route.paramIndex(name) }

// Request is a validated request: everything later steps need, and nothing
// that came from the client unchecked.
type Request struct {
	Route *Route
	// PathParam is the canonical (lower-cased) address or hash; "" when the
	// route has none.
	PathParam string
	Query     Query
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
}

// UpstreamPath is the legacy path of the request, below upstream.base_url.
func (r *Request) UpstreamPath() string {
	if r.PathParam == "" {
		return r.Route.Legacy
	}
	i := strings.IndexByte(r.Route.Legacy, '{')
	j := strings.IndexByte(r.Route.Legacy, '}')
	return r.Route.Legacy[:i] + r.PathParam + r.Route.Legacy[j+1:]
}

// Validate checks the path parameter and query of a request to route and
// returns its canonical form, or an *Error with status 400.
func (rt *Route) Validate(pathParam, rawQuery string) (*Request, error) {
	req := &Request{Route: rt}
	switch rt.Path {
	case pathAddress:
		if !isHex(pathParam, 40) {
			return nil, badRequest(msgInvalidAddress)
		}
		req.PathParam = strings.ToLower(pathParam)
	case pathTxHash:
		if !isHex(pathParam, 64) {
			return nil, badRequest(msgInvalidTxHash)
		}
		req.PathParam = strings.ToLower(pathParam)
	}

	var raw [maxParams][]string
	if err := rt.splitQuery(rawQuery, &raw); err != nil {
		return nil, err
	}
	q := &req.Query
	q.route = rt
	for i := range rt.Params {
		p := &rt.Params[i]
		if err := p.canonical(raw[i], &q.vals[i], &q.ints[i]); err != nil {
			return nil, err
		}
		if q.vals[i] == "" {
			continue
		}
		switch {
		case p.Kind == KindCursor:
			req.Cursor = true
		case p.Kind == KindInt && p.Bound == BoundUpper:
			// Two upper bounds (activity's toBlock and toTimestamp): the
			// time bound is the one the settle window can judge.
			if !req.HasUpper || req.UpperIsBlock {
				req.Upper, req.HasUpper, req.UpperIsBlock = q.ints[i], true, p.Block
			}
		}
	}
	if rt.Check != nil {
		if err := rt.Check(q); err != nil {
			return nil, err
		}
	}
	// The key ends with the canonical query: one string holds both.
	prefix := len(rt.Name) + 1 + len(req.PathParam) + 1
	req.Key = q.encode(rt.Name + " " + req.PathParam + "?")
	req.RawQuery = req.Key[prefix:]
	return req, nil
}

// splitQuery is url.ParseQuery without the map: the raw values of the
// route's own parameters, by index; unknown names are dropped here.
// Semicolons are refused as ParseQuery refuses them (Go 1.17), so that no
// proxy in front can read the query differently from the edge.
func (rt *Route) splitQuery(query string, raw *[maxParams][]string) error {
	for query != "" {
		var pair string
		pair, query, _ = strings.Cut(query, "&")
		if pair == "" {
			continue
		}
		if strings.IndexByte(pair, ';') >= 0 {
			return badRequest("Invalid query string")
		}
		key, value, _ := strings.Cut(pair, "=")
		key, err := unescape(key)
		if err != nil {
			return badRequest("Invalid query string")
		}
		i := rt.paramIndex(key)
		if i < 0 {
			// Unknown parameters are dropped (issue 2), but a broken
			// escape anywhere is still a broken query.
			if _, err := unescape(value); err != nil {
				return badRequest("Invalid query string")
			}
			continue
		}
		if value, err = unescape(value); err != nil {
			return badRequest("Invalid query string")
		}
		raw[i] = append(raw[i], value)
	}
	return nil
}

func (rt *Route) paramIndex(name string) int {
	for i := range rt.Params {
		if rt.Params[i].Name == name {
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

// canonical validates the raw values of one parameter and stores its
// canonical value (and integer, where it has one).
func (p *Param) canonical(raw []string, val *string, num *int64) error {
	if p.Kind == KindList {
		return p.canonicalList(raw, val)
	}
	// Empty values count as absent: `?limit=` is a client that filled in
	// nothing, not a client that asked for a page of zero.
	v := ""
	for _, r := range raw {
		if r == "" {
			continue
		}
		if v != "" {
			return badRequest("Invalid " + p.Name + ": given more than once")
		}
		v = r
	}
	switch p.Kind {
	case KindInt:
		if v == "" {
			return nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return badRequest("Invalid " + p.Name + ": must be a non-negative integer")
		}
		*val, *num = strconv.FormatInt(n, 10), n
	case KindPageSize:
		n := int64(p.DefaultInt)
		if v != "" {
			var err error
			n, err = strconv.ParseInt(v, 10, 64)
			if err != nil || n < int64(p.Min) || (n > int64(p.Max) && !p.Cap) {
				return badRequest("Invalid " + p.Name + ": must be an integer from " +
					strconv.Itoa(p.Min) + " to " + strconv.Itoa(p.Max))
			}
			n = min(n, int64(p.Max))
		}
		*val, *num = strconv.FormatInt(n, 10), n
	case KindEnum:
		if v == "" {
			*val = p.Default
			return nil
		}
		lv := strings.ToLower(v)
		if !slices.Contains(p.Enum, lv) {
			return badRequest("Invalid " + p.Name + ": must be " + strings.Join(p.Enum, " or "))
		}
		*val = lv
	case KindTxHash:
		if v == "" {
			return nil
		}
		if !isHex(v, 64) {
			return badRequest(msgInvalidTxHash)
		}
		*val = strings.ToLower(v)
	case KindDecimal:
		if v == "" {
			return nil
		}
		if !isDecimal(v) {
			return badRequest("Invalid " + p.Name + ": must be a non-negative decimal")
		}
		*val = v
	case KindCursor:
		if v == "" {
			return nil
		}
		if len(v) > maxCursorLen || !printable(v) {
			return badRequest("Invalid cursor")
		}
		*val = v
	}
	return nil
}

func (p *Param) canonicalList(raw []string, val *string) error {
	var items []string
	for _, r := range raw {
		for item := range strings.SplitSeq(r, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			if p.Fold {
				item = strings.ToLower(item)
			}
			if p.Enum != nil {
				if !slices.Contains(p.Enum, item) {
					return badRequest("Invalid " + p.Name + ": values must be " + strings.Join(p.Enum, " or "))
				}
			} else if len(item) > maxValueLen || !isIdent(item) {
				return badRequest("Invalid " + p.Name + " value")
			}
			items = append(items, item)
			// The limit counts values as given (SPEC "Limits"), before
			// duplicates are folded away.
			if p.Max > 0 && len(items) > p.Max {
				return badRequest("Too many " + p.Name + " values: at most " + strconv.Itoa(p.Max))
			}
		}
	}
	if len(items) == 0 {
		return nil
	}
	slices.Sort(items)
	items = slices.Compact(items)
	*val = strings.Join(items, ",")
	return nil
}

// encode returns prefix followed by the canonical query: known parameters
// in table order, lists comma-joined with each element escaped, nothing
// else.
func (q *Query) encode(prefix string) string {
	n := len(prefix)
	for i, p := range q.route.Params {
		if q.vals[i] != "" {
			n += len(p.Name) + 2 + len(q.vals[i])*3 // at worst every byte escaped
		}
	}
	b := make([]byte, 0, n)
	b = append(b, prefix...)
	first := true
	for i, p := range q.route.Params {
		v := q.vals[i]
		if v == "" {
			continue
		}
		if !first {
			b = append(b, '&')
		}
		first = false
		b = append(b, p.Name...)
		b = append(b, '=')
		if p.Kind == KindList {
			for j, item := range strings.Split(v, ",") {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendEscaped(b, item)
			}
			continue
		}
		b = appendEscaped(b, v)
	}
	return string(b)
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

// checkOrderBook holds the cross-parameter rules of SPEC endpoint 1.
func checkOrderBook(q *Query) error {
	if q.Value("marketId") == "" && q.Value("conditionId") == "" && q.Value("tokenId") == "" {
		return badRequest(msgFilterRequired)
	}
	return checkRange(q, "from", "to")
}

// checkRanges refuses inverted ranges. SPEC states `to >= from` for the
// order book only; an inverted block or timestamp range elsewhere can only
// ever return nothing, so the edge says so instead (README, assumptions).
func checkRanges(pairs ...string) func(q *Query) error {
	return func(q *Query) error {
		for i := 0; i+1 < len(pairs); i += 2 {
			if err := checkRange(q, pairs[i], pairs[i+1]); err != nil {
				return err
			}
		}
		return nil
	}
}

func checkRange(q *Query, lo, hi string) error {
	from, okFrom := q.Int(lo)
	to, okTo := q.Int(hi)
	if okFrom && okTo && to < from {
		return badRequest("Invalid range: " + hi + " must be >= " + lo)
	}
	return nil
}

// isHex reports whether s is "0x" followed by n hex digits (either case).
func isHex(s string, n int) bool {
	if len(s) != n+2 || s[0] != '0' || s[1] != 'x' {
		return false
	}
	for i := 2; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
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
// value; cursors are base64 (SPEC endpoint 2).
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
