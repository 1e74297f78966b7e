package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"tradergate/cache/configerr"
)

// decodeStrict decodes YAML into out, a pointer to a struct, and returns
// the document's root node, by which later problems are placed on their
// line. Every problem of the file is reported at once, each naming its
// field by its path ("server.listen"), not by a Go type, at the line and
// column yaml.v3 gives the node: a config that does not fit never
// half-loads.
//
// The file is parsed into a yaml.Node tree and the tree walked against
// the Go types before anything is decoded: an unknown field, or a value
// that does not fit its field, is found at its node, with the node's own
// position, and the message is ours. yaml.v3 reports a syntax error with
// its line only inside its message text, so such an error is passed on
// whole, as a problem of the file.
func decodeStrict(data []byte, out any) (*yaml.Node, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, configerr.List{{Msg: strings.Join(strings.Fields(err.Error()), " ")}}
	}
	if len(root.Content) == 0 {
		return nil, configerr.List{{Msg: "config is empty"}}
	}
	doc := root.Content[0]
	var errs configerr.List
	walkNode(doc, reflect.TypeOf(out).Elem(), "", &errs)
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	if err := doc.Decode(out); err != nil {
		// The walk has checked every value against its field, so the
		// decoder has nothing left to refuse; should it, its message is
		// all there is to say.
		errs.Append(err)
		return nil, errs
	}
	return doc, nil
}

var durationType = reflect.TypeFor[time.Duration]()

// walkNode checks n against t: every mapping key names a field of t (by
// its yaml tag), every value has the kind its field needs, every scalar
// decodes into its field's type. Problems go to errs.
func walkNode(n *yaml.Node, t reflect.Type, path string, errs *configerr.List) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // the zero value, as the decoder leaves it
	}
	at := func(n *yaml.Node, hint, format string, args ...any) {
		*errs = append(*errs, &configerr.FieldError{Path: path, Line: n.Line, Col: n.Column, Msg: fmt.Sprintf(format, args...), Hint: hint})
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			at(n, "", "must be a mapping of fields, got %s", kindOf(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Tag == "!!merge" { // <<: *defaults
				walkNode(v, t, path, errs)
				continue
			}
			f, ok := fieldByTag(t, k.Value)
			if !ok {
				*errs = append(*errs, &configerr.FieldError{Path: join(path, k.Value), Line: k.Line, Col: k.Column,
					Msg: "unknown field", Hint: "known here: " + strings.Join(fieldNames(t), ", ")})
				continue
			}
			walkNode(v, f.Type, join(path, k.Value), errs)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			at(n, "", "must be a mapping, got %s", kindOf(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			walkNode(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), errs)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			at(n, "", "must be a list, got %s", kindOf(n))
			return
		}
		for i, v := range n.Content {
			walkNode(v, t.Elem(), path+"["+strconv.Itoa(i)+"]", errs)
		}
	case reflect.Interface:
	default:
		if n.Kind != yaml.ScalarNode {
			at(n, "", "must be a single value, got %s", kindOf(n))
			return
		}
		if n.Decode(reflect.New(t).Interface()) == nil {
			return
		}
		switch {
		case t == durationType && isNumber(n.Value):
			at(n, "add a unit, such as 1m", "%s has no unit", n.Value)
		case t == durationType:
			at(n, "", "must be a duration such as 500ms, 30s or 1m, got %q", n.Value)
		case t.Kind() == reflect.Bool:
			at(n, "", "must be true or false, got %q", n.Value)
		case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
			at(n, "", "must be a whole number, got %q", n.Value)
		case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uintptr:
			at(n, "", "must be a whole number, 0 or more, got %q", n.Value)
		case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
			at(n, "", "must be a number, got %q", n.Value)
		default:
			at(n, "", "cannot be %q", n.Value)
		}
	}
}

// kindOf names a node's kind for a message.
func kindOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// fieldByTag finds the field a mapping key names, looking into inline
// structs (`yaml:",inline"`) as the decoder does.
func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" && f.Type.Kind() == reflect.Struct {
			if inner, ok := fieldByTag(f.Type, name); ok {
				return inner, true
			}
			continue
		}
		if tag == name && tag != "-" && f.IsExported() {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// fieldNames are the keys a mapping for t may hold, sorted.
func fieldNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case opts == "inline" && f.Type.Kind() == reflect.Struct:
			names = append(names, fieldNames(f.Type)...)
		case tag != "" && tag != "-" && f.IsExported():
			names = append(names, tag)
		}
	}
	slices.Sort(names)
	return names
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// place puts each problem of errs without a line on the line and column
// of its field in the document under doc, or of the deepest mapping key
// or item on the way to it when the field is left out; a problem whose
// section is not in the file either stays without a place.
func place(doc *yaml.Node, errs configerr.List) {
	for _, e := range errs {
		if e.Line == 0 && e.Path != "" && doc != nil {
			e.Line, e.Col = position(doc, e.Path)
		}
	}
}

// position is the line and column of the field at path ("keys[1].sha256")
// under n, as place finds it.
func position(n *yaml.Node, path string) (line, col int) {
	for _, step := range strings.FieldsFunc(path, func(r rune) bool { return r == '.' || r == '[' || r == ']' }) {
		for n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if k := n.Content[i]; k.Value == step {
					line, col, next = k.Line, k.Column, n.Content[i+1]
					break
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(step); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
				line, col = next.Line, next.Column
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return line, col
}
