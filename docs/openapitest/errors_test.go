package openapitest_test

import (
	"net/http"
	"strings"
	"testing"

	"tradergate/legacysim"
)

// TestErrorsAnswerPerContract holds the edge's failure answers to
// docs/openapi.json, each with its exact message (docs/CONTRACT.md#errors).
func TestErrorsAnswerPerContract(t *testing.T) {
	e := newEdge(t)
	w := e.sim.Wallets()[0]
	tx := e.sim.TradeTxs()[0]
	cases := []struct {
		name    string
		method  string
		path    string
		key     string
		headers []string
		status  int
		message string
	}{
		{name: "bad address", path: "/v1/trader/0x12/activity", status: 400, message: "Invalid address format"},
		{name: "bad hash", path: "/v1/tx/0xzz", status: 400, message: "Invalid txHash format"},
		{name: "bad txHash parameter", path: "/v1/trader/" + w + "/activity?txHash=12", status: 400, message: "Invalid txHash format"},
		{name: "no order book filter", path: "/v1/orderbook/events?limit=5", status: 400, message: "tokenId, marketId, or conditionId is required"},
		{name: "order book limit", path: "/v1/orderbook/events?tokenId=1&limit=10001", status: 400, message: "Invalid limit: must be an integer from 1 to 10000"},
		{name: "page limit", path: "/v1/trader/" + w + "/positions/open?limit=101", status: 400, message: "Invalid limit: must be an integer from 1 to 100"},
		{name: "too many tokens", path: "/v1/orderbook/events?tokenId=" + strings.Repeat("1,", 51), status: 400, message: "Too many tokenId values: at most 50"},
		{name: "event type", path: "/v1/orderbook/events?tokenId=1&eventType=trade", status: 400, message: "Invalid eventType: values must be book or price_change"},
		{name: "order", path: "/v1/orderbook/events?tokenId=1&order=up", status: 400, message: "Invalid order: must be asc or desc"},
		{name: "inverted range", path: "/v1/orderbook/events?tokenId=1&from=5&to=4", status: 400, message: "Invalid range: to must be >= from"},
		{name: "negative bound", path: "/v1/trader/" + w + "/activity?fromBlock=-1", status: 400, message: "Invalid fromBlock: must be a non-negative integer"},
		{name: "given twice", path: "/v1/trader/" + w + "/activity?limit=1&limit=2", status: 400, message: "Invalid limit: given more than once"},
		{name: "transfer type", path: "/v1/trader/" + w + "/deposits-withdrawals?type=gift", status: 400, message: "Invalid type: must be deposit or withdrawal"},
		{name: "min amount", path: "/v1/trader/" + w + "/deposits-withdrawals?minAmount=1e3", status: 400, message: "Invalid minAmount: must be a non-negative decimal"},
		{name: "cursor", path: "/v1/trader/" + w + "/positions/closed?cursor=%01", status: 400, message: "Invalid cursor"},
		{name: "query string", path: "/v1/tx/" + tx + "?a=1;b=2", status: 400, message: "Invalid query string"},
		{name: "no key", path: "/v1/tx/" + tx, key: "-", status: 401, message: "Missing or invalid API key"},
		{name: "unknown key", path: "/v1/tx/" + tx, key: "not-a-key", status: 401, message: "Missing or invalid API key"},
		{name: "no key, unknown path", path: "/v1/nowhere", key: "-", status: 401, message: "Missing or invalid API key"},
		{name: "route not allowed", path: "/v1/trader/" + w + "/activity", key: keyTxOnly, status: 403, message: "API key is not allowed to use this resource"},
		{name: "unknown path", path: "/v1/nowhere", status: 404, message: "Not found"},
		{name: "trailing slash", path: "/v1/tx/" + tx + "/", status: 404, message: "Not found"},
		{name: "POST", method: http.MethodPost, path: "/v1/tx/" + tx, status: 405, message: "Method not allowed"},
		{name: "DELETE", method: http.MethodDelete, path: "/v1/orderbook/events", status: 405, message: "Method not allowed"},
		{name: "long URI", path: "/v1/tx/" + tx + "?pad=" + strings.Repeat("a", 9000), status: 414, message: "URI too long"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := c.method
			if method == "" {
				method = http.MethodGet
			}
			key := c.key
			switch key {
			case "":
				key = keyAll
			case "-":
				key = ""
			}
			_, body := e.checkAs(t, method, c.path, key, c.status, c.headers...)
			want := `{"message":"` + c.message + `","status_code":"0","data":null}`
			if string(body) != want {
				t.Errorf("body %s, want %s", body, want)
			}
		})
	}

	t.Run("rate limited", func(t *testing.T) {
		path := "/v1/tx/" + tx
		e.checkAs(t, http.MethodGet, path, keyTiny, http.StatusOK)
		resp, body := e.checkAs(t, http.MethodGet, path, keyTiny, http.StatusTooManyRequests)
		if want := `{"message":"Rate limit exceeded","status_code":"0","data":null}`; string(body) != want {
			t.Errorf("body %s, want %s", body, want)
		}
		if resp.Header.Get("X-RateLimit-Remaining") != "0" {
			t.Errorf("X-RateLimit-Remaining %q, want 0", resp.Header.Get("X-RateLimit-Remaining"))
		}
	})
}

// TestLegacyFailuresAnswerPerContract holds the answers the edge gives for
// a failing legacy host to the document: its 4xx passed on, its 5xx and
// 429 mapped (docs/CONTRACT.md#errors).
func TestLegacyFailuresAnswerPerContract(t *testing.T) {
	e := newEdge(t)
	w := e.sim.Wallets()[0]
	cases := []struct {
		name    string
		faults  legacysim.Faults
		path    string
		status  int
		message string
	}{
		{"404 passed on", legacysim.Faults{Route: "activity", FailStatus: 404}, "/v1/trader/" + w + "/activity", 404, "Not found"},
		{"410 passed on", legacysim.Faults{Route: "activity", FailStatus: 410}, "/v1/trader/" + w + "/activity?limit=3", 410, "Gone"},
		{"418 passed on", legacysim.Faults{Route: "activity", FailStatus: 418}, "/v1/trader/" + w + "/activity?limit=4", 418, "I'm a teapot"},
		{"legacy 5xx", legacysim.Faults{Route: "positions_open", FailStatus: 500}, "/v1/trader/" + w + "/positions/open", 502, "Upstream error"},
		{"legacy refuses the edge", legacysim.Faults{Route: "positions_open", FailStatus: 401}, "/v1/trader/" + w + "/positions/open?limit=2", 502, "Upstream rejected the gateway's credential"},
		{"legacy rate limit", legacysim.Faults{Route: "deposits_withdrawals", FailStatus: 429, RetryAfter: 1}, "/v1/trader/" + w + "/deposits-withdrawals", 503, "Upstream rate limited"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.sim.SetFaults(c.faults)
			t.Cleanup(func() { e.sim.SetFaults(legacysim.Faults{}) })
			resp, body := e.check(t, c.path, c.status)
			want := `{"message":"` + c.message + `","status_code":"0","data":null}`
			if string(body) != want {
				t.Errorf("body %s, want %s", body, want)
			}
			if c.status == 503 && resp.Header.Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
		})
	}
}
