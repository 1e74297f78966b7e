package openapitest_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"tradergate/docs"
	"tradergate/docs/openapitest"
)

// TestAlteredAnswersFail proves the document can refuse: each case takes a
// real answer of the edge, changes one thing, and must get a violation.
func TestAlteredAnswersFail(t *testing.T) {
	e := newEdge(t)
	w := e.sim.Wallets()[0]
	tok := e.sim.Markets()[0].Tokens[0]

	type answer struct {
		req  *http.Request
		resp *http.Response
		body string
	}
	get := func(path string) answer {
		req, resp, body := e.do(t, http.MethodGet, path, keyAll)
		if errs := e.v.ResponseErrors(req, resp, body); len(errs) > 0 {
			t.Fatalf("%s: the unaltered answer already fails: %v", path, errs)
		}
		return answer{req, resp, string(body)}
	}
	activity := get("/v1/trader/" + w + "/activity?limit=3")
	positions := get("/v1/trader/" + w + "/positions/closed?limit=3")
	events := get("/v1/orderbook/events?tokenId=" + tok + "&limit=5")
	trade := get("/v1/tx/" + e.sim.TradeTxs()[0])
	combo := get("/v1/tx/" + e.sim.ComboTxs()[0])
	wallet := get("/v1/trader/wallet-address/0x" + strings.Repeat("0", 40))
	badReq := func() answer {
		req, resp, body := e.do(t, http.MethodGet, "/v1/trader/0x12/activity", keyAll)
		return answer{req, resp, string(body)}
	}()

	// set gives the first member named field the raw JSON value raw ("" drops
	// the member); the member must be there.
	set := func(t *testing.T, s, field, raw string) string {
		re := regexp.MustCompile(`"` + field + `":("[^"]*"|[^,}\]]+)`)
		loc := re.FindStringIndex(s)
		if loc == nil {
			t.Fatalf("no %q in the answer", field)
		}
		from, to := loc[0], loc[1]
		if raw != "" {
			return s[:from] + `"` + field + `":` + raw + s[to:]
		}
		if to < len(s) && s[to] == ',' {
			to++
		} else if s[from-1] == ',' {
			from--
		}
		return s[:from] + s[to:]
	}
	cases := []struct {
		name   string
		want   string // in the violations: the alteration is what failed
		from   answer
		body   func(t *testing.T, s string) string
		header func(h http.Header)
		status int
	}{
		{name: "missing field", want: `missing property 'fee'`, from: activity, body: func(t *testing.T, s string) string { return set(t, s, "fee", "") }},
		{name: "extra field", want: `'extra' not allowed`, from: activity, body: func(t *testing.T, s string) string {
			return strings.Replace(s, `"actionType":`, `"extra":1,"actionType":`, 1)
		}},
		{name: "integer as string", want: `outcomeIndex: got string, want integer`, from: activity, body: func(t *testing.T, s string) string { return set(t, s, "outcomeIndex", `"1"`) }},
		{name: "decimal as number", want: `balance: got number, want string`, from: positions, body: func(t *testing.T, s string) string { return set(t, s, "balance", `12.5`) }},
		{name: "price in cents", want: `currentPrice: '78.5' does not match pattern`, from: positions, body: func(t *testing.T, s string) string { return set(t, s, "currentPrice", `"78.5"`) }},
		{name: "decimal in exponent form", want: `usdcSize: '1e-7' does not match pattern`, from: activity, body: func(t *testing.T, s string) string { return set(t, s, "usdcSize", `"1e-7"`) }},
		{name: "decimal with a plus sign", want: `totalPnl: '+1' does not match pattern`, from: positions, body: func(t *testing.T, s string) string { return set(t, s, "totalPnl", `"+1"`) }},
		{name: "empty decimal", want: `size: '' does not match pattern`, from: activity, body: func(t *testing.T, s string) string { return set(t, s, "size", `""`) }},
		{name: "null where the contract has none", want: `closed: got null, want boolean`, from: positions, body: func(t *testing.T, s string) string { return set(t, s, "closed", `null`) }},
		{name: "unknown action type", want: `actionType: value must be one of`, from: activity, body: func(t *testing.T, s string) string { return set(t, s, "actionType", `"Mint"`) }},
		{name: "unknown liquidity role", want: `liquidityRole: value must be one of`, from: activity, body: func(t *testing.T, s string) string { return set(t, s, "liquidityRole", `"BOTH"`) }},
		{name: "address too short", want: `traderAddress: '0x12' does not match pattern`, from: activity, body: func(t *testing.T, s string) string { return set(t, s, "traderAddress", `"0x12"`) }},
		{name: "time in milliseconds as string", want: `blockTimestamp: got string, want integer`, from: activity, body: func(t *testing.T, s string) string { return set(t, s, "blockTimestamp", `"1700000000"`) }},
		{name: "variant B envelope", want: `missing property 'status_code'`, from: activity, body: func(t *testing.T, s string) string {
			return strings.Replace(s, `{"message":"OK","status_code":"1",`, `{"success":true,"code":"0","message":"success",`, 1)
		}},
		{name: "items missing", want: `missing property 'items'`, from: activity, body: func(t *testing.T, s string) string {
			return `{"message":"OK","status_code":"1","data":{"nextCursor":null}}`
		}},
		{name: "nextCursor missing", want: `missing property 'nextCursor'`, from: activity, body: func(t *testing.T, s string) string {
			return `{"message":"OK","status_code":"1","data":{"items":[]}}`
		}},
		{name: "book event with a price", want: `price: 'not' failed`, from: events, body: func(t *testing.T, s string) string { return set(t, s, "price", `"0.5"`) }},
		{name: "book level of three", want: `maxItems: got 3, want 2`, from: events, body: func(t *testing.T, s string) string {
			return strings.Replace(s, `"bids":[[`, `"bids":[["0.1","1","2"],[`, 1)
		}},
		{name: "unknown event type", want: `eventType: value must be`, from: events, body: func(t *testing.T, s string) string { return set(t, s, "eventType", `"trade"`) }},
		{name: "TRADE with comboActions", want: `comboActions: 'not' failed`, from: trade, body: func(t *testing.T, s string) string { return set(t, s, "comboActions", `[]`) }},
		{name: "COMBO with a marketId", want: `marketId: 'not' failed`, from: combo, body: func(t *testing.T, s string) string { return set(t, s, "marketId", `"1"`) }},
		{name: "variant B fill names", want: `'assetId' not allowed`, from: trade, body: func(t *testing.T, s string) string {
			return strings.Replace(s, `"tokenId":`, `"assetId":`, 1)
		}},
		{name: "variant B top-level name", want: `'profileAddress' not allowed`, from: trade, body: func(t *testing.T, s string) string {
			return strings.Replace(s, `"traderAddress":`, `"profileAddress":`, 1)
		}},
		{name: "wallet mapping data null", want: `data: got null, want object`, from: wallet, body: func(t *testing.T, s string) string {
			return `{"message":"OK","status_code":"1","data":null}`
		}},
		{name: "error with data", want: `data: 'not' failed`, from: badReq, body: func(t *testing.T, s string) string { return set(t, s, "data", `{}`) }},
		{name: "error with success status", want: `status_code: value must be '0'`, from: badReq, body: func(t *testing.T, s string) string { return set(t, s, "status_code", `"1"`) }},
		{name: "error without message", want: `missing property 'message'`, from: badReq, body: func(t *testing.T, s string) string { return set(t, s, "message", "") }},
		{name: "no X-Cache", want: `Required header 'X-Cache' was not found`, from: activity, header: func(h http.Header) { h.Del("X-Cache") }},
		{name: "unknown X-Cache", want: `value must be one of 'HIT', 'MISS', 'STALE', 'BYPASS'`, from: activity, header: func(h http.Header) { h.Set("X-Cache", "MAYBE") }},
		{name: "public Cache-Control", want: `'public, max-age=1' does not match pattern`, from: activity, header: func(h http.Header) { h.Set("Cache-Control", "public, max-age=1") }},
		{name: "no rate limit", want: `Required header 'X-RateLimit-Limit' was not found`, from: activity, header: func(h http.Header) { h.Del("X-Ratelimit-Limit") }},
		{name: "error cached", want: `value must be 'no-store'`, from: badReq, header: func(h http.Header) { h.Set("Cache-Control", "max-age=60") }},
		{name: "undocumented status", want: `response code '201'`, from: activity, status: http.StatusCreated},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := c.from.body
			if c.body != nil {
				body = c.body(t, body)
				if body == c.from.body {
					t.Fatal("the case changed nothing")
				}
			}
			resp := *c.from.resp
			resp.Header = c.from.resp.Header.Clone()
			if c.header != nil {
				c.header(resp.Header)
			}
			if c.status != 0 {
				resp.StatusCode = c.status
			}
			errs := e.v.ResponseErrors(c.from.req, &resp, []byte(body))
			if len(errs) == 0 {
				t.Fatalf("altered answer validated: %s", body)
			}
			if all := fmt.Sprint(errs); !strings.Contains(all, c.want) {
				t.Fatalf("violations do not mention %q:\n%s", c.want, all)
			}
		})
	}
}

// TestDocument checks the document by the validator's own rules, and that
// the check can fail: broken documents are refused.
func TestDocument(t *testing.T) {
	if _, err := openapitest.Load(docs.OpenAPI()); err != nil {
		t.Fatal(err)
	}
	for name, doc := range map[string]string{
		"no info":         `{"openapi":"3.1.0","paths":{}}`,
		"info not object": `{"openapi":"3.1.0","info":5,"paths":{}}`,
		"bad path item":   `{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{"/x":{"get":{"responses":5}}}}`,
	} {
		if _, err := openapitest.Load([]byte(doc)); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}
