package native

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"unicode/utf8"
)

// Comparing two answers: both are decoded as JSON values and walked
// together. Object key order is not a difference; everything else is:
// a value, a type, a missing or an extra field or item. Numbers are
// compared as the text they were written in: the contract writes decimals
// as strings (docs/CONTRACT.md#conventions), so a number that changes its
// spelling is a change worth seeing.

// Absent stands for the value of a field or item that one side does not
// have.
const Absent = "<absent>"

// maxValue caps each value kept with a difference, in bytes.
const maxValue = 200

// maxKept caps the differences kept of one comparison; all are counted.
const maxKept = 64

// Difference is one place where the two answers disagree. Path names it
// with array indexes folded ("data.items[].price"), so that one field
// wrong on every item is one path; the values are JSON text, cut to
// maxValue bytes, or Absent.
type Difference struct {
	Path   string
	Legacy string
	Native string
}

// Comparison is the outcome of Compare.
type Comparison struct {
	// Count is the number of differences found.
	Count int
	// Kept are the first of them (up to maxKept), in document order,
	// object keys sorted.
	Kept []Difference
	// ByPath counts every difference by its folded path; nil when none.
	ByPath map[string]int
}

// Compare compares the legacy-derived answer with native's. An error says
// that one side is not one JSON value; legacy's is checked first.
func Compare(legacy, native []byte) (Comparison, error) {
	a, err := decodeValue(legacy)
	if err != nil {
		return Comparison{}, fmt.Errorf("legacy answer: %w", err)
	}
	b, err := decodeValue(native)
	if err != nil {
		return Comparison{}, fmt.Errorf("native answer: %w", err)
	}
	var c Comparison
	var path []byte
	c.walk(&path, a, b)
	return c, nil
}

// decodeValue decodes exactly one JSON value, its numbers as json.Number.
func decodeValue(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

// absent marks a side without the value.
type absent struct{}

func (c *Comparison) walk(path *[]byte, a, b any) {
	switch x := a.(type) {
	case map[string]any:
		if y, ok := b.(map[string]any); ok {
			c.objects(path, x, y)
			return
		}
	case []any:
		if y, ok := b.([]any); ok {
			c.arrays(path, x, y)
			return
		}
	case json.Number:
		if y, ok := b.(json.Number); ok && x == y {
			return
		}
	case string, bool, nil:
		if a == b {
			return
		}
	}
	c.add(*path, a, b)
}

func (c *Comparison) objects(path *[]byte, x, y map[string]any) {
	keys := make([]string, 0, len(x)+len(y))
	for k := range x {
		keys = append(keys, k)
	}
	for k := range y {
		if _, ok := x[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	n := len(*path)
	for _, k := range keys {
		if n > 0 {
			*path = append(*path, '.')
		}
		*path = append(*path, k...)
		va, inA := x[k]
		vb, inB := y[k]
		switch {
		case !inA:
			c.add(*path, absent{}, vb)
		case !inB:
			c.add(*path, va, absent{})
		default:
			c.walk(path, va, vb)
		}
		*path = (*path)[:n]
	}
}

func (c *Comparison) arrays(path *[]byte, x, y []any) {
	n := len(*path)
	*path = append(*path, "[]"...)
	for i := range max(len(x), len(y)) {
		switch {
		case i >= len(x):
			c.add(*path, absent{}, y[i])
		case i >= len(y):
			c.add(*path, x[i], absent{})
		default:
			c.walk(path, x[i], y[i])
		}
	}
	*path = (*path)[:n]
}

func (c *Comparison) add(path []byte, a, b any) {
	c.Count++
	p := string(path)
	if p == "" {
		p = "$" // the whole answer
	}
	if c.ByPath == nil {
		c.ByPath = map[string]int{}
	}
	c.ByPath[p]++
	if len(c.Kept) < maxKept {
		c.Kept = append(c.Kept, Difference{Path: p, Legacy: show(a), Native: show(b)})
	}
}

// show is a value as JSON text, cut to maxValue bytes on a rune boundary.
func show(v any) string {
	if _, ok := v.(absent); ok {
		return Absent
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "<unprintable>"
	}
	return cut(string(b), maxValue)
}

// cut shortens s to at most n bytes without splitting a rune.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
