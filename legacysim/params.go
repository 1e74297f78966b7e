package legacysim

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
)

// Query parameter parsing shared by the endpoints. A parameter given with
// an empty value counts as absent, and unknown parameters are ignored.

// listParam collects the values of name, comma-separated, repeated, or
// both (docs/CONTRACT.md#query-parameters), dropping empty pieces.
func listParam(q url.Values, name string) []string {
	var out []string
	for _, v := range q[name] {
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// intParam parses an optional integer; ok is false when absent.
func intParam(q url.Values, name, unit string) (v int64, ok bool, err *apiError) {
	s := q.Get(name)
	if s == "" {
		return 0, false, nil
	}
	v, perr := strconv.ParseInt(s, 10, 64)
	if perr != nil {
		return 0, false, badRequest("Invalid " + name + ": must be an integer" + unit)
	}
	return v, true, nil
}

// pageLimit parses the page size `limit`: def when absent, 400 outside
// [1, hi] unless capAbove, which clamps values above hi to hi (activity,
// docs/CONTRACT.md#params-activity).
func pageLimit(q url.Values, def, hi int, capAbove bool) (int, *apiError) {
	s := q.Get("limit")
	if s == "" {
		return def, nil
	}
	v, err := strconv.Atoi(s)
	if errors.Is(err, strconv.ErrRange) && s[0] != '-' {
		v, err = hi+1, nil // an integer all the same, just above any range
	}
	switch {
	case err == nil && v >= 1 && v <= hi:
		return v, nil
	case err == nil && capAbove && v > hi:
		return hi, nil
	case capAbove && err == nil:
		return 0, badRequest("Invalid limit: must be at least 1")
	case capAbove:
		return 0, badRequest("Invalid limit: must be an integer")
	}
	return 0, badRequest("Invalid limit: must be an integer from 1 to " + strconv.Itoa(hi))
}

// cursorParam parses an optional cursor of the wanted kind.
func cursorParam(q url.Values, kind cursorKind) (*cursorPos, *apiError) {
	s := q.Get("cursor")
	if s == "" {
		return nil, nil
	}
	c, ok := parseCursor(s, kind)
	if !ok {
		return nil, badRequest("Invalid cursor")
	}
	return &c, nil
}

// marketIDsParam parses `marketIds` (comma-separated market IDs, on
// activity, combo_positions_closed and positions_closed:
// docs/CONTRACT.md#params-activity and #params-positions) into a set of
// market indexes; unknown IDs match nothing. nil means no filter.
func (s *Sim) marketIDsParam(q url.Values) ([]bool, *apiError) {
	ids := listParam(q, "marketIds")
	if len(ids) == 0 {
		return nil, nil
	}
	set := make([]bool, len(s.markets))
	for _, id := range ids {
		if !isDigits(id) {
			return nil, badRequest("Invalid marketIds: must be comma-separated numeric market IDs")
		}
		if i, ok := s.marketByID[id]; ok {
			set[i] = true
		}
	}
	return set, nil
}

// decimalMicroParam parses an optional decimal string with up to six
// decimals (an amount, docs/CONTRACT.md#conventions) into micro units.
func decimalMicroParam(q url.Values, name string) (v int64, ok bool, err *apiError) {
	s := q.Get(name)
	if s == "" {
		return 0, false, nil
	}
	bad := badRequest("Invalid " + name + ": must be a decimal number with at most 6 decimals")
	neg := strings.HasPrefix(s, "-")
	intPart, frac, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	if !isDigits(intPart) || len(intPart) > 12 || len(frac) > 6 || (frac != "" && !isDigits(frac)) {
		return 0, false, bad
	}
	n, _ := strconv.ParseInt(intPart, 10, 64)
	f, _ := strconv.ParseInt((frac + "000000")[:6], 10, 64)
	v = n*micro + f
	if neg {
		v = -v
	}
	return v, true, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isHex0x reports whether s is "0x" and n hex digits: n = 40 is an
// address, n = 64 a transaction hash or condition id
// (docs/CONTRACT.md#conventions). Case does not matter anywhere, "0X"
// included: the host
// matches addresses and hashes case-insensitively.
func isHex0x(s string, n int) bool {
	if len(s) != 2+n || s[0] != '0' || s[1] != 'x' && s[1] != 'X' {
		return false
	}
	for i := 2; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func isAddress(s string) bool { return isHex0x(s, 40) }
func isHash(s string) bool    { return isHex0x(s, 64) }
