package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// decodeStrict decodes YAML into out and reports problems as one line each
// naming the field by its path ("server.listen"), not by a Go type name: a
// config that does not fit never half-loads.
//
// yaml.v3's KnownFields reports unknown fields as "field x not found in type
// proxy.ServerConfig" and type errors by line only, so the node tree is walked
// once against the Go types to name the paths.
func decodeStrict(data []byte, out any) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return oneLine(err)
	}
	if len(root.Content) == 0 {
		return errors.New("config is empty")
	}
	doc := root.Content[0]
	paths := map[int][]scalarAt{} // line -> scalars on it, to name the fields of type errors
	if err := walkNode(doc, reflect.TypeOf(out).Elem(), "", paths); err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(out); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			msgs := make([]string, len(te.Errors))
			for i, m := range te.Errors {
				msgs[i] = namePath(m, paths)
			}
			return errors.New(strings.Join(msgs, "; "))
		}
		return oneLine(err)
	}
	return nil
}

// walkNode checks that every mapping key names a field of t (by its yaml
// tag), recursing into structs, slices and maps.
func walkNode(n *yaml.Node, t reflect.Type, path string, paths map[int][]scalarAt) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if path != "" {
		paths[n.Line] = append(paths[n.Line], scalarAt{path, n.Value})
	}
	switch n.Kind {
	case yaml.AliasNode:
		return walkNode(n.Alias, t, path, paths)
	case yaml.MappingNode:
		switch t.Kind() {
		case reflect.Struct:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				f, ok := fieldByTag(t, k.Value)
				if !ok {
					return fmt.Errorf("line %d: %s: unknown field", k.Line, join(path, k.Value))
				}
				if err := walkNode(v, f.Type, join(path, k.Value), paths); err != nil {
					return err
				}
			}
		case reflect.Map:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if err := walkNode(v, t.Elem(), join(path, k.Value), paths); err != nil {
					return err
				}
			}
		}
	case yaml.SequenceNode:
		if t.Kind() == reflect.Slice {
			for i, v := range n.Content {
				if err := walkNode(v, t.Elem(), path+"["+strconv.Itoa(i)+"]", paths); err != nil {
					return err
				}
			}
		}
	}
	return nil
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

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// scalarAt is a node's path and scalar value.
type scalarAt struct{ path, value string }

var typeErrRe = regexp.MustCompile("^line (\\d+): cannot unmarshal \\S+ `([^`]*)`")

// namePath turns "line 7: cannot unmarshal !!str `x` into int" into
// "line 7: server.max_header_bytes: cannot unmarshal !!str `x` into int".
// Several fields can share a line (flow style, `{requests: 1, window: 1m}`):
// the quoted value picks the one.
func namePath(msg string, paths map[int][]scalarAt) string {
	m := typeErrRe.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	line, _ := strconv.Atoi(m[1])
	cands := paths[line]
	for i := len(cands) - 1; i >= 0; i-- {
		if cands[i].value == m[2] || i == 0 {
			return "line " + m[1] + ": " + cands[i].path + ": " + strings.TrimPrefix(msg, "line "+m[1]+": ")
		}
	}
	return msg
}

func oneLine(err error) error {
	return errors.New(strings.Join(strings.Fields(err.Error()), " "))
}
