package openapitest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"tradergate/docs"
)

// param is the part of a documented query parameter this test reads.
type param struct {
	Ref    string `json:"$ref"`
	Name   string `json:"name"`
	In     string `json:"in"`
	Schema struct {
		Type     any      `json:"type"`
		Minimum  *int64   `json:"minimum"`
		Maximum  *int64   `json:"maximum"`
		MaxItems *int     `json:"maxItems"`
		Enum     []string `json:"enum"`
		Items    struct {
			Enum []string `json:"enum"`
		} `json:"items"`
	} `json:"schema"`
}

// TestDocumentedLimitsAreEnforced reads every query parameter limit the
// document states (minimum, maximum, maxItems, enum) and checks that the
// edge refuses a value just past it with a 400 and accepts the value at
// it: the document and the edge's validation cannot drift apart unseen.
func TestDocumentedLimitsAreEnforced(t *testing.T) {
	e := newEdge(t)
	var doc struct {
		Paths map[string]struct {
			Get *struct {
				Route      string  `json:"x-route-name"`
				Parameters []param `json:"parameters"`
			} `json:"get"`
		} `json:"paths"`
		Components struct {
			Parameters map[string]param `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(docs.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	// Narrow queries: the answers at the limits stay small.
	tok := e.sim.Markets()[0].Tokens[0]
	base := map[string]url.Values{
		"orderbook_events": {"tokenId": {tok}, "to": {"0"}},
		"orderbook_book":   {"tokenId": {tok}},
	}
	fill := strings.NewReplacer("{address}", e.sim.Wallets()[0], "{txHash}", e.sim.TradeTxs()[0])
	checked := 0
	for path, item := range doc.Paths {
		op := item.Get
		if op == nil || op.Route == "" || op.Route == "orderbook_book" {
			// orderbook_book is documented ahead of the edge serving it.
			continue
		}
		for _, p := range op.Parameters {
			if p.Ref != "" {
				p = doc.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
			}
			if p.In != "query" {
				continue
			}
			s := p.Schema
			var over, at []string // values past the limit, and at it
			switch {
			case s.MaxItems != nil:
				vals := make([]string, *s.MaxItems+1)
				for i := range vals {
					vals[i] = listValue(p.Name, i, s.Items.Enum)
				}
				over, at = []string{strings.Join(vals, ",")}, []string{strings.Join(vals[:len(vals)-1], ",")}
			case s.Maximum != nil:
				over, at = []string{strconv.FormatInt(*s.Maximum+1, 10)}, []string{strconv.FormatInt(*s.Maximum, 10)}
			}
			if s.Minimum != nil {
				over = append(over, strconv.FormatInt(*s.Minimum-1, 10))
				at = append(at, strconv.FormatInt(*s.Minimum, 10))
			}
			if s.Enum != nil || s.Items.Enum != nil {
				over = append(over, "no-such-value")
			}
			try := func(v string, want int) {
				t.Helper()
				q := url.Values{}
				for k, vs := range base[op.Route] {
					q[k] = vs
				}
				q.Set(p.Name, v)
				req, resp, body := e.do(t, http.MethodGet, fill.Replace(path)+"?"+q.Encode(), keyAll)
				if resp.StatusCode != want {
					t.Errorf("%s %s=%s: status %d, want %d: %s", op.Route, p.Name, v, resp.StatusCode, want, body)
					return
				}
				e.v.Response(t, req, resp, body)
				checked++
			}
			for _, v := range over {
				try(v, http.StatusBadRequest)
			}
			for _, v := range at {
				try(v, http.StatusOK)
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d limits checked: the document's parameters were not read", checked)
	}
	t.Logf("%d limits checked", checked)
}

// listValue is the i-th value of a list parameter, well-formed for the
// legacy host too (it refuses ids not in its own formats).
func listValue(name string, i int, enum []string) string {
	switch {
	case enum != nil:
		return enum[i%len(enum)]
	case name == "conditionId":
		return fmt.Sprintf("0x%064x", i+1)
	}
	return strconv.Itoa(1000 + i)
}
