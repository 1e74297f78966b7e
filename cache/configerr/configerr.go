// Package configerr is the configuration's problems as values: each one
// names the field at fault by its path in the file ("server.listen"), its
// place in the file once known, what is wrong and, where one helps, what
// to do. A section's Validate returns them as a List; the configuration
// gathers every section's into one List, places each on its line, and
// `tradergate check`, start and reload report them all at once.
//
// It sits below every package that owns a configuration section and
// imports nothing of the edge. Its home is under cache, the lowest floor
// with a configuration section: cache and limits may not import proxy/,
// and internal/ holds test support only.
package configerr

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// FieldError is one problem of a configuration file.
type FieldError struct {
	// Path is the field's path in the file ("keys[1].sha256"); "": the
	// file as a whole.
	Path string
	// Line and Col place the field in the file, from 1; 0: not known (a
	// field left out is placed on its nearest section, one placed by
	// Locate).
	Line, Col int
	// Msg says what is wrong, without the path.
	Msg string
	// Hint says what to do, when the message does not; "": none.
	Hint string
	// Err is the cause when the problem is an error of its own (a file
	// that cannot be read: errors.Is(err, fs.ErrNotExist)); Msg holds
	// its text.
	Err error
}

// Wrap is a problem of the field at path whose cause is err, with about
// ("the file x") before err's text when given.
func Wrap(path, about string, err error) *FieldError {
	msg := err.Error()
	if about != "" {
		msg = about + ": " + msg
	}
	return &FieldError{Path: path, Msg: msg, Err: err}
}

// Unwrap is the cause, if any.
func (e *FieldError) Unwrap() error { return e.Err }

// Error is "line:col: path: msg; hint", each part present only when known.
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		b.WriteString("line " + strconv.Itoa(e.Line))
		if e.Col > 0 {
			b.WriteString(":" + strconv.Itoa(e.Col))
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Detail())
	return b.String()
}

// Detail is the problem without its place: "path: msg; hint".
func (e *FieldError) Detail() string {
	s := e.Msg
	if e.Path != "" {
		s = e.Path + ": " + s
	}
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// List is every problem found, in the order Sort puts them. It is an error
// when it holds one; Err gives nil for an empty List, as an error
// interface holding an empty List would not be nil.
type List []*FieldError

// Add appends a problem of the field at path.
func (l *List) Add(path, format string, args ...any) {
	*l = append(*l, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// AddHint appends a problem of the field at path with a hint saying what
// to do.
func (l *List) AddHint(path, hint, format string, args ...any) {
	*l = append(*l, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...), Hint: hint})
}

// Append appends err's problems: those of a List or a FieldError, even
// when joined (errors.Join) or wrapped, as they are; any other error as a
// problem of the file as a whole. A nil err appends nothing.
func (l *List) Append(err error) {
	var fe *FieldError
	switch e := err.(type) {
	case nil:
	case List:
		*l = append(*l, e...)
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			l.Append(inner)
		}
	default:
		var inner List
		switch {
		case errors.As(err, &inner):
			*l = append(*l, inner...)
		case errors.As(err, &fe):
			*l = append(*l, fe)
		default:
			*l = append(*l, &FieldError{Msg: err.Error()})
		}
	}
}

// AppendAt appends err's problems as Append does, with path put before
// the path of each: a part that names its fields from its own root
// ("window") placed where the file holds it ("plans.free.window").
func (l *List) AppendAt(path string, err error) {
	var inner List
	inner.Append(err)
	for _, e := range inner {
		switch {
		case e.Path == "":
			e.Path = path
		case e.Path[0] == '[':
			e.Path = path + e.Path
		default:
			e.Path = path + "." + e.Path
		}
	}
	*l = append(*l, inner...)
}

// Sort orders the problems as an editor walks a file: by line and column,
// those without a place last, by path (the file's own, with none, first)
// and message.
func (l List) Sort() {
	slices.SortStableFunc(l, func(a, b *FieldError) int {
		if (a.Line == 0) != (b.Line == 0) {
			return cmp.Compare(b.Line, a.Line) // the placed one first
		}
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col),
			cmp.Compare(a.Path, b.Path), cmp.Compare(a.Msg, b.Msg))
	})
}

// Error is the problems one a line.
func (l List) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Err is l as an error: nil when it holds no problem.
func (l List) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}
