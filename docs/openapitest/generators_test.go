package openapitest_test

// The shapes client generators stumble on, checked without the generators
// (clients_test.go runs them): each problem named by its JSON path.

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"unicode"

	"tradergate/docs"
)

// generatorProblems lists what in the OpenAPI document spec a common
// client generator (ogen, oapi-codegen, openapi-typescript with
// openapi-fetch) reads wrongly or refuses:
//   - a const or enum without its type (ogen falls back to any, and its
//     discriminators then cannot tell the variants apart; oapi-codegen
//     binds such a header or field to interface{} and fails on it);
//   - a header or parameter schema without a type;
//   - a property typed exactly null (openapi-fetch's result types drop
//     it): it is declared [X, "null"], X its type in the other variant;
//   - an operation that answers 304 without an If-None-Match parameter;
//   - one response component under two status codes of an operation (ogen
//     cannot tell them apart);
//   - two components of the kinds generators make types of (schemas,
//     parameters, responses) whose names differ only in the first letter's
//     case, or are equal (oapi-codegen's duplicate type names).
func generatorProblems(spec []byte) ([]string, error) {
	var doc map[string]any
	if err := json.Unmarshal(spec, &doc); err != nil {
		return nil, err
	}
	var out []string
	add := func(path, format string, args ...any) { out = append(out, path+": "+fmt.Sprintf(format, args...)) }

	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			_, isConst := v["const"]
			_, isEnum := v["enum"]
			if _, typed := v["type"]; (isConst || isEnum) && !typed {
				add(path, "const or enum without a type")
			}
			if props, ok := v["properties"].(map[string]any); ok {
				for name, p := range props {
					if p, ok := p.(map[string]any); ok && p["type"] == "null" {
						add(path+".properties."+name, `typed exactly "null"`)
					}
				}
			}
			for k, c := range v {
				if k == "example" || k == "examples" {
					continue
				}
				walk(path+"."+k, c)
			}
		case []any:
			for i, c := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), c)
			}
		}
	}
	walk("$", doc)

	comps, _ := doc["components"].(map[string]any)
	kind := func(k string) map[string]any { m, _ := comps[k].(map[string]any); return m }
	resolve := func(v any) map[string]any {
		m, _ := v.(map[string]any)
		if ref, ok := m["$ref"].(string); ok {
			parts := strings.Split(strings.TrimPrefix(ref, "#/components/"), "/")
			if len(parts) == 2 {
				m, _ = kind(parts[0])[parts[1]].(map[string]any)
			}
		}
		return m
	}
	typed := func(path string, schema any) {
		s, _ := schema.(map[string]any)
		if s == nil {
			add(path, "no schema")
			return
		}
		if _, ok := s["type"]; !ok && s["$ref"] == nil {
			add(path, "schema without a type")
		}
	}
	for name, h := range kind("headers") {
		typed("$.components.headers."+name+".schema", resolve(h)["schema"])
	}
	for name, p := range kind("parameters") {
		typed("$.components.parameters."+name+".schema", resolve(p)["schema"])
	}

	paths, _ := doc["paths"].(map[string]any)
	for path, item := range paths {
		item, _ := item.(map[string]any)
		for method, op := range item {
			op, ok := op.(map[string]any)
			if !ok || op["responses"] == nil {
				continue
			}
			at := fmt.Sprintf("$.paths[%q].%s", path, method)
			params, _ := op["parameters"].([]any)
			if shared, ok := item["parameters"].([]any); ok {
				params = append(params, shared...)
			}
			ifNoneMatch := false
			for i, p := range params {
				p := resolve(p)
				if _, ok := p["$ref"]; !ok {
					typed(fmt.Sprintf("%s.parameters[%d].schema", at, i), p["schema"])
				}
				if p["in"] == "header" && strings.EqualFold(fmt.Sprint(p["name"]), "If-None-Match") {
					ifNoneMatch = true
				}
			}
			responses, _ := op["responses"].(map[string]any)
			if _, ok := responses["304"]; ok && !ifNoneMatch {
				add(at, "answers 304 but declares no If-None-Match parameter")
			}
			byRef := map[string][]string{}
			for code, r := range responses {
				if ref, ok := r.(map[string]any)["$ref"].(string); ok {
					byRef[ref] = append(byRef[ref], code)
				}
			}
			for ref, codes := range byRef {
				if len(codes) > 1 {
					sort.Strings(codes)
					add(at+".responses", "%s under %s", ref, strings.Join(codes, ", "))
				}
			}
		}
	}

	seen := map[string]string{}
	for _, k := range []string{"schemas", "parameters", "responses"} {
		for name := range kind(k) {
			r := []rune(name)
			r[0] = unicode.ToUpper(r[0])
			if other, ok := seen[string(r)]; ok {
				add("$.components."+k+"."+name, "same type name as %s", other)
			}
			seen[string(r)] = "$.components." + k + "." + name
		}
	}
	sort.Strings(out)
	return out, nil
}

// TestDocumentReadsInGenerators: docs/openapi.json has none of the
// shapes generatorProblems finds.
func TestDocumentReadsInGenerators(t *testing.T) {
	problems, err := generatorProblems(docs.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestGeneratorProblemsFound: each shape is reported, by its path.
func TestGeneratorProblemsFound(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"untyped const", `{"components":{"schemas":{"A":{"type":"object","properties":{"m":{"const":"OK"}}}}}}`,
			`$.components.schemas.A.properties.m: const or enum without a type`},
		{"untyped header", `{"components":{"headers":{"Vary":{"schema":{"pattern":"x"}}}}}`,
			`$.components.headers.Vary.schema: schema without a type`},
		{"null property", `{"components":{"schemas":{"A":{"type":"object","properties":{"side":{"type":"null"}}}}}}`,
			`$.components.schemas.A.properties.side: typed exactly "null"`},
		{"304 without If-None-Match", `{"paths":{"/x":{"get":{"responses":{"200":{"description":"d"},"304":{"description":"d"}}}}}}`,
			`$.paths["/x"].get: answers 304 but declares no If-None-Match parameter`},
		{"shared response", `{"paths":{"/x":{"get":{"responses":{"400":{"$ref":"#/components/responses/F"},"401":{"$ref":"#/components/responses/F"}}}}}}`,
			`$.paths["/x"].get.responses: #/components/responses/F under 400, 401`},
		{"collision", `{"components":{"schemas":{"Address":{"type":"string"}},"parameters":{"address":{"schema":{"type":"string"}}}}}`,
			`same type name as`},
	} {
		got, err := generatorProblems([]byte(c.doc))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(got, "\n"), c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}
