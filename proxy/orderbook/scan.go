package orderbook

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// scan reads a page in one pass, in place. It checks the structure the
// rebuild relies on (objects, arrays, member names, closed strings and
// containers, nothing after the body) and each value the rebuild uses is
// checked where it is used; it does not validate the grammar inside
// values it skips (a sourceHash, an outcome): the pages come from the
// edge's cache, and the edge's rewrite (normalize) validated every byte
// of them before they were cached, so a second full validation would only
// slow every rebuild (docs/BENCHMARKS.md).
type scan struct {
	b   []byte
	i   int
	esc bool // the last string read (name or value) has escapes
}

var errEOF = errors.New("unexpected end of JSON")

func (s *scan) ws() {
	// Pages rarely hold whitespace: one comparison decides the usual case.
	for s.i < len(s.b) && s.b[s.i] <= ' ' {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-whitespace byte, 0 at the end.
func (s *scan) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *scan) errAt(what string) error {
	if s.i >= len(s.b) {
		return errEOF
	}
	return fmt.Errorf("%q at offset %d where %s was expected", s.b[s.i], s.i, what)
}

// open reads the opening delimiter of an object ('{') or array ('[').
func (s *scan) open(c byte) error {
	if s.peek() != c {
		return s.errAt(string(c))
	}
	s.i++
	return nil
}

// more reports whether the object or array being read has another member
// or element, reading the comma before it or its closer after the last.
// first tells whether nothing was read from it yet.
func (s *scan) more(closer byte, first bool) (bool, error) {
	c := s.peek()
	if c == closer {
		s.i++
		return false, nil
	}
	if !first {
		if c != ',' {
			return false, s.errAt(`"," or "` + string(closer) + `"`)
		}
		s.i++
		if c := s.peek(); c == '}' || c == ']' {
			return false, s.errAt("a value after a comma")
		}
	}
	return true, nil
}

// name reads a member name and the colon after it, returning the quoted
// name.
func (s *scan) name() ([]byte, error) {
	if s.peek() != '"' {
		return nil, s.errAt("a member name")
	}
	start := s.i
	end, esc, err := stringEnd(s.b, start)
	if err != nil {
		return nil, err
	}
	s.i, s.esc = end, esc
	if s.peek() != ':' {
		return nil, s.errAt(`":"`)
	}
	s.i++
	return s.b[start:end], nil
}

// value reads one value and returns its bytes; a container is skipped
// whole.
func (s *scan) value() ([]byte, error) {
	c := s.peek() // skips whitespace: the value starts after it
	start := s.i
	switch {
	case c == '"':
		end, esc, err := stringEnd(s.b, start)
		if err != nil {
			return nil, err
		}
		s.i, s.esc = end, esc
	case c == '{' || c == '[':
		end, err := containerEnd(s.b, start)
		if err != nil {
			return nil, err
		}
		s.i = end
	case c == '-' || c >= '0' && c <= '9' || c == 't' || c == 'f' || c == 'n':
		for s.i < len(s.b) && !isDelim(s.b[s.i]) {
			s.i++
		}
	default:
		return nil, s.errAt("a value")
	}
	return s.b[start:s.i], nil
}

// end checks that only whitespace follows the body.
func (s *scan) end() error {
	if s.peek() != 0 {
		return s.errAt("the end of the body")
	}
	return nil
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ':', '"', '{', '[', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// stringEnd returns the offset past the string that opens at b[i], and
// whether the string has escapes.
func stringEnd(b []byte, i int) (end int, esc bool, err error) {
	// Eight bytes at a time: a page is mostly strings, and this search
	// was the largest part of a rebuild.
	j := i + 1
	for ; j+8 <= len(b); j += 8 {
		x := binary.LittleEndian.Uint64(b[j:])
		if t := zeroBytes(x^quotes) | zeroBytes(x^backslashes); t != 0 {
			j += bits.TrailingZeros64(t) / 8
			break
		}
	}
	for ; j < len(b); j++ {
		switch b[j] {
		case '"':
			return j + 1, false, nil
		case '\\':
			end, err := stringEndFrom(b, i, j)
			return end, true, err
		}
	}
	return len(b), false, errors.New("unterminated string")
}

const (
	quotes      = 0x2222222222222222 // '"' in every byte
	backslashes = 0x5c5c5c5c5c5c5c5c // '\\' in every byte
	lows        = 0x0101010101010101
	highs       = 0x8080808080808080
)

// zeroBytes has the high bit set in (at least) the lowest zero byte of x
// and in no byte below it: the first match of a search, little-endian.
func zeroBytes(x uint64) uint64 { return (x - lows) &^ x & highs }

// stringEndFrom is stringEnd for a string with escapes, from b[j] on.
func stringEndFrom(b []byte, i, j int) (int, error) {
	for j < len(b) {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			break
		}
		j += k
		// The quote ends the string unless an odd run of backslashes
		// escapes it.
		n := 0
		for m := j - 1; m > i && b[m] == '\\'; m-- {
			n++
		}
		if n%2 == 0 {
			return j + 1, nil
		}
		j++
	}
	return len(b), errors.New("unterminated string")
}

// containerEnd returns the offset past the object or array at b[i].
func containerEnd(b []byte, i int) (int, error) {
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			end, _, err := stringEnd(b, j)
			if err != nil {
				return end, err
			}
			j = end - 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return j + 1, nil
			}
		}
	}
	return len(b), errEOF
}
