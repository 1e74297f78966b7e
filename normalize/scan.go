package normalize

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner validates JSON exactly as the jsontext decoder does by default
// (RFC 7493: RFC 8259 grammar, valid UTF-8 including escaped surrogates,
// unique member names, nesting at most maxDepth), without building tokens.
// It reads the whole body: the envelope, data that passes through byte for
// byte (order book data, SHAPES.md 1; variant A data), which must still be
// validated, and data that is rewritten as it is read (values.go), at a
// speed the token decoder does not reach (see BenchmarkRewrite).
// FuzzScanner holds it to jsontext's verdict.
type scanner struct {
	src   []byte
	names []nameRef // member names of the objects being read, innermost last
	text  []byte    // unescaped names, referenced by nameRef
}

// nameRef locates one member name: src[start:end], or text[start:end] when
// the name had escapes.
type nameRef struct {
	start, end int
	unescaped  bool
}

// maxDepth is the nesting limit of jsontext, so both accept the same bodies.
const maxDepth = 10000

var (
	errSyntax    = errors.New("invalid JSON")
	errEOF       = errors.New("unexpected end of JSON")
	errDepth     = errors.New("JSON nested too deeply")
	errDuplicate = errors.New("duplicate object member name")
	errUTF8      = errors.New("invalid UTF-8 in string")
)

func (s *scanner) reset(src []byte) {
	s.src = src
	s.names = s.names[:0]
	s.text = s.text[:0]
}

// ws returns the offset of the first non-whitespace byte at or after i.
func (s *scanner) ws(i int) int {
	for i < len(s.src) {
		switch s.src[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value validates the value starting at src[i] (no leading whitespace),
// inside containers nested depth deep, and returns the offset past it.
func (s *scanner) value(i, depth int) (int, error) {
	if i >= len(s.src) {
		return i, errEOF
	}
	switch c := s.src[i]; c {
	case '{':
		return s.members(i, depth+1, nil)
	case '[':
		return s.elements(i, depth+1, nil)
	case '"':
		end, _, err := s.str(i)
		return end, err
	case 't':
		return s.literal(i, "true")
	case 'f':
		return s.literal(i, "false")
	case 'n':
		return s.literal(i, "null")
	default:
		if c == '-' || isDigit(c) {
			return s.number(i)
		}
		return i, errSyntax
	}
}

func (s *scanner) literal(i int, lit string) (int, error) {
	end := i + len(lit)
	if end > len(s.src) {
		if string(s.src[i:]) == lit[:len(s.src)-i] {
			return len(s.src), errEOF
		}
		return i, errSyntax
	}
	if string(s.src[i:end]) != lit {
		return i, errSyntax
	}
	return end, nil
}

// number validates -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (s *scanner) number(i int) (int, error) {
	b := s.src
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, errEOF
	case b[i] == '0':
		i++
	case isDigit(b[i]):
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return i, errSyntax
	}
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		for ; i < len(b) && isDigit(b[i]); i++ {
		}
		if i == start {
			return i, errAt(b, i)
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		start := i
		for ; i < len(b) && isDigit(b[i]); i++ {
		}
		if i == start {
			return i, errAt(b, i)
		}
	}
	return i, nil
}

// errAt is errEOF when the input ended at i, errSyntax otherwise.
func errAt(b []byte, i int) error {
	if i >= len(b) {
		return errEOF
	}
	return errSyntax
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// str validates the string starting at src[i] (the opening quote) and
// returns the offset past its closing quote and whether it has escapes.
func (s *scanner) str(i int) (end int, escaped bool, err error) {
	b := s.src
	i++
	for {
		// Skip plain ASCII eight bytes at a time: a byte stops the run if
		// it is '"', '\\', a control character or non-ASCII. Only the first
		// flagged byte is exact, which is all this needs.
		for {
			if i+8 > len(b) { // the last bytes, one at a time
				for i < len(b) && b[i] >= 0x20 && b[i] < utf8.RuneSelf && b[i] != '"' && b[i] != '\\' {
					i++
				}
				break
			}
			x := binary.LittleEndian.Uint64(b[i:])
			q := x ^ (lsb * '"')
			e := x ^ (lsb * '\\')
			m := ((q - lsb) &^ q) | ((e - lsb) &^ e) | ((x - lsb*0x20) &^ x) | x
			if m &= msb; m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		if i >= len(b) {
			return i, escaped, errEOF
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, nil
		case c == '\\':
			escaped = true
			if i, err = s.escape(i); err != nil {
				return i, escaped, err
			}
		case c < 0x20:
			return i, escaped, errSyntax
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				if !utf8.FullRune(b[i:]) {
					return i, escaped, errEOF
				}
				return i, escaped, errUTF8
			}
			i += n
		}
	}
}

// escape validates the escape sequence at src[i] ('\\') and returns the
// offset past it. An escaped surrogate must be a valid pair, as jsontext
// requires when it validates UTF-8.
func (s *scanner) escape(i int) (int, error) {
	b := s.src
	if i+1 >= len(b) {
		return i, errEOF
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2, nil
	case 'u':
	default:
		return i, errSyntax
	}
	r1, err := hex4(b, i+2)
	if err != nil {
		return i, err
	}
	i += 6
	if !utf16.IsSurrogate(r1) {
		return i, nil
	}
	if i+1 >= len(b) || b[i] != '\\' || b[i+1] != 'u' {
		return i, errAt(b, min(i+1, len(b)))
	}
	r2, err := hex4(b, i+2)
	if err != nil {
		return i, err
	}
	if utf16.DecodeRune(r1, r2) == utf8.RuneError {
		return i, errSyntax
	}
	return i + 6, nil
}

func hex4(b []byte, i int) (rune, error) {
	var r rune
	for j := i; j < i+4; j++ {
		if j >= len(b) {
			return 0, errEOF
		}
		c := b[j]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, errSyntax
		}
		r = r<<4 | rune(c)
	}
	return r, nil
}

// elements validates the array at src[i] ('[') whose values are at the
// given depth (its own depth, 1 for a top-level array) and returns the
// offset past it. fn, when not nil, handles each element at its offset and
// returns the offset past it; otherwise elements are validated by value.
func (s *scanner) elements(i, depth int, fn func(at int) (int, error)) (int, error) {
	if depth > maxDepth {
		return i, errDepth
	}
	i, more := s.open(i, ']')
	if !more {
		return i, nil
	}
	for {
		var err error
		if fn != nil {
			i, err = fn(i)
		} else {
			i, err = s.value(i, depth)
		}
		if err != nil {
			return i, err
		}
		if i, more, err = s.next(i, ']'); !more {
			return i, err
		}
	}
}

// memberFunc handles one member of an object: name is its text
// (unescaped; valid only until fn reads further), nameAt the offset of the
// name as written (see rawName) and at the offset of its value. It returns
// the offset past the value.
type memberFunc func(name []byte, nameAt, at int) (int, error)

// members validates the object at src[i] ('{') like elements, handing each
// member to fn when it is not nil. It is the one walk over object members:
// the envelope, data passed through and data rewritten all use it.
func (s *scanner) members(i, depth int, fn memberFunc) (int, error) {
	if depth > maxDepth {
		return i, errDepth
	}
	b := s.src
	i, more := s.open(i, '}')
	if !more {
		return i, nil
	}
	frame, text := len(s.names), len(s.text)
	defer func() { s.names, s.text = s.names[:frame], s.text[:text] }()
	var bloom uint64
	var big map[string]struct{}
	for {
		if i >= len(b) {
			return i, errEOF
		}
		if b[i] != '"' {
			return i, errSyntax
		}
		end, escaped, err := s.str(i)
		if err != nil {
			return end, err
		}
		name, err := s.addName(i, end, escaped, frame, &bloom, &big)
		if err != nil {
			return i, err
		}
		nameAt := i
		i = s.ws(end)
		if i >= len(b) {
			return i, errEOF
		}
		if b[i] != ':' {
			return i, errSyntax
		}
		if fn != nil {
			i, err = fn(name, nameAt, s.ws(i+1))
		} else {
			i, err = s.value(s.ws(i+1), depth)
		}
		if err != nil {
			return i, err
		}
		if i, more, err = s.next(i, '}'); !more {
			return i, err
		}
	}
}

// next reads what follows a value in an array or object: a comma, after
// which it returns the offset of the next value (more), or the closer,
// after which it returns the offset past the container.
func (s *scanner) next(i int, closer byte) (_ int, more bool, err error) {
	i = s.ws(i)
	if i >= len(s.src) {
		return i, false, errEOF
	}
	switch s.src[i] {
	case ',':
		return s.ws(i + 1), true, nil
	case closer:
		return i + 1, false, nil
	}
	return i, false, errSyntax
}

// open steps past the opening delimiter at src[i] and any whitespace; more
// is false when the container is empty, i then past its closing delimiter.
func (s *scanner) open(i int, closer byte) (_ int, more bool) {
	i = s.ws(i + 1)
	if i < len(s.src) && s.src[i] == closer {
		return i + 1, false
	}
	return i, true
}

// bigObject is the member count above which names are checked through a
// map, so that an object with many names costs linear time, not quadratic.
const bigObject = 32

// addName records the name src[start:end] (quoted) of the object whose
// names begin at names[frame], failing if the object already has it, and
// returns the name's text.
func (s *scanner) addName(start, end int, escaped bool, frame int, bloom *uint64, big *map[string]struct{}) ([]byte, error) {
	ref := nameRef{start: start + 1, end: end - 1}
	if escaped {
		ref.unescaped = true
		ref.start = len(s.text)
		s.text = appendUnescaped(s.text, s.src[start+1:end-1])
		ref.end = len(s.text)
	}
	name := s.name(ref)
	n := len(s.names) - frame
	switch {
	case n < bigObject:
		// A 64-bit filter on length and end bytes settles most names
		// without comparing: order book items have a dozen short names.
		var h uint
		if len(name) > 0 {
			h = uint(len(name))*7 + uint(name[0])*3 + uint(name[len(name)-1])
		}
		bit := uint64(1) << (h & 63)
		if *bloom&bit != 0 {
			for _, other := range s.names[frame:] {
				if string(s.name(other)) == string(name) {
					return nil, errDuplicate
				}
			}
		}
		*bloom |= bit
	case n == bigObject:
		*big = make(map[string]struct{}, 2*bigObject)
		for _, other := range s.names[frame:] {
			(*big)[string(s.name(other))] = struct{}{}
		}
		fallthrough
	default:
		if _, dup := (*big)[string(name)]; dup {
			return nil, errDuplicate
		}
		(*big)[string(name)] = struct{}{}
	}
	s.names = append(s.names, ref)
	return name, nil
}

func (s *scanner) name(r nameRef) []byte {
	if r.unescaped {
		return s.text[r.start:r.end]
	}
	return s.src[r.start:r.end]
}

// appendUnescaped appends the text of a validated string body (between the
// quotes) for name comparison.
func appendUnescaped(dst, q []byte) []byte {
	for i := 0; i < len(q); {
		if q[i] != '\\' {
			dst = append(dst, q[i])
			i++
			continue
		}
		switch c := q[i+1]; c {
		case 'u':
			r1, _ := hex4(q, i+2)
			i += 6
			if utf16.IsSurrogate(r1) {
				r2, _ := hex4(q, i+2)
				r1 = utf16.DecodeRune(r1, r2)
				i += 6
			}
			dst = utf8.AppendRune(dst, r1)
			continue
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		default: // '"', '\\', '/'
			dst = append(dst, c)
		}
		i += 2
	}
	return dst
}

// rawName returns the name of a member as written, quotes included, from
// the offsets handed to a memberFunc: only whitespace and the colon stand
// between the name's closing quote and the value. It is found on demand,
// by the rewrite alone, because handing every callback a slice would slow
// the pass-through scan of large order book pages (BenchmarkRewrite's
// OrderBook rows; docs/BENCHMARKS.md, Package benchmarks).
func (s *scanner) rawName(nameAt, at int) []byte {
	j := at - 1
	for s.src[j] != ':' {
		j--
	}
	for j--; s.src[j] != '"'; j-- {
	}
	return s.src[nameAt : j+1]
}
