package route

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"tradergate/normalize"
)

func routeByName(t testing.TB, name string) *Route {
	t.Helper()
	r := NewTable().ByName(name)
	if r == nil {
		t.Fatalf("no route %q", name)
	}
	return r
}

const (
	addr  = "0x1111111111111111111111111111111111111111"
	hash  = "0x2222222222222222222222222222222222222222222222222222222222222222"
	token = "71321045679252212594626385532706912750332728571942532289631379312455583992563"
)

func TestRouterMatch(t *testing.T) {
	rt := NewTable()
	tests := []struct {
		path, route, param string
	}{
		{"/v1/orderbook/events", OrderBookEvents, ""},
		{"/v1/trader/" + addr + "/activity", Activity, addr},
		{"/v1/trader/" + addr + "/deposits-withdrawals", depositsWithdrawals, addr},
		{"/v1/trader/" + addr + "/combo-positions/closed", comboPositionsClosed, addr},
		{"/v1/trader/" + addr + "/positions/closed", positionsClosed, addr},
		{"/v1/trader/" + addr + "/positions/open", positionsOpen, addr},
		{"/v1/tx/" + hash, tx, hash},
		{"/v1/trader/wallet-address/" + addr, walletAddress, addr},
		// The overlap that rules out http.ServeMux: the literal wins.
		{"/v1/trader/wallet-address/activity", walletAddress, "activity"},
		{"/v1/trader/x/activity", Activity, "x"},
		{"/v1/orderbook/events/", "", ""},
		{"/v1/orderbook", "", ""},
		{"/v1/tx/", "", ""},
		{"/v1/tx/" + hash + "/x", "", ""},
		{"/v1/trader//activity", "", ""},
		{"/v1/trader/" + addr + "/positions", "", ""},
		{"/", "", ""},
		{"", "", ""},
		{"/v2/orderbook/events", "", ""},
		// Longer than any route: refused before any is compared.
		{"/v1/trader/" + addr + "/positions/open/a/b/c/d/e", "", ""},
		{"/v1/trader/" + addr + "/positions/open/", "", ""},
	}
	for _, tc := range tests {
		r, param := rt.Match(tc.path)
		got := ""
		if r != nil {
			got = r.Name
		}
		if got != tc.route || param != tc.param {
			t.Errorf("match(%q) = %q, %q; want %q, %q", tc.path, got, param, tc.route, tc.param)
		}
	}
}

func TestValidateCanonical(t *testing.T) {
	tests := []struct {
		name, route, param, query string
		wantQuery                 string
	}{
		{"orderbook defaults", OrderBookEvents, "", "tokenId=" + token,
			"tokenId=" + token + "&order=asc&limit=1000"},
		{"orderbook lists sorted and deduplicated", OrderBookEvents, "", "tokenId=b,a&tokenId=a&marketId=2,1",
			"marketId=1,2&tokenId=a,b&order=asc&limit=1000"},
		{"orderbook order case-insensitive", OrderBookEvents, "", "marketId=1&order=DESC",
			"marketId=1&order=desc&limit=1000"},
		{"conditionId case-insensitive", OrderBookEvents, "", "conditionId=0xABcd",
			"conditionId=0xabcd&order=asc&limit=1000"},
		{"eventType both", OrderBookEvents, "", "marketId=1&eventType=price_change&eventType=book",
			"marketId=1&eventType=book,price_change&order=asc&limit=1000"},
		{"from to ints", OrderBookEvents, "", "marketId=1&from=10&to=20&limit=1",
			"marketId=1&from=10&to=20&order=asc&limit=1"},
		{"zero is an integer", OrderBookEvents, "", "marketId=1&from=0",
			"marketId=1&from=0&order=asc&limit=1000"},
		{"limit bounds", OrderBookEvents, "", "marketId=1&limit=10000",
			"marketId=1&order=asc&limit=10000"},
		{"unknown params dropped", OrderBookEvents, "", "marketId=1&foo=bar&apiKey=secret",
			"marketId=1&order=asc&limit=1000"},
		{"empty values are absent", OrderBookEvents, "", "marketId=1&tokenId=&limit=&cursor=",
			"marketId=1&order=asc&limit=1000"},
		{"cursor kept byte for byte", OrderBookEvents, "", "marketId=1&cursor=ab%2B%2Fcd%3D%3D",
			"marketId=1&order=asc&limit=1000&cursor=ab%2B%2Fcd%3D%3D"},
		{"activity default 20", Activity, "0x" + strings.ToUpper(addr[2:]), "", "limit=20"},
		{"activity cap 100", Activity, addr, "limit=500", "limit=100"},
		{"activity filters", Activity, addr,
			"marketIds=9,3&txHash=0x" + strings.ToUpper(hash[2:]) + "&fromBlock=1&toBlock=5&fromTimestamp=7&toTimestamp=9&limit=7",
			"marketIds=3,9&txHash=" + hash + "&fromBlock=1&toBlock=5&fromTimestamp=7&toTimestamp=9&limit=7"},
		{"transfers type case-insensitive", depositsWithdrawals, addr, "type=DEPOSIT&minAmount=10.5",
			"type=deposit&minAmount=10.5&limit=20"},
		{"positions open", positionsOpen, addr, "limit=100&marketIds=1", "limit=100"},
		{"positions closed", positionsClosed, addr, "marketIds=1", "marketIds=1&limit=20"},
		{"combo closed", comboPositionsClosed, addr, "", "limit=20"},
		{"tx", tx, "0x" + strings.ToUpper(hash[2:]), "x=1", ""},
		{"wallet", walletAddress, addr, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := routeByName(t, tc.route).Validate(tc.param, tc.query)
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if req.RawQuery != tc.wantQuery {
				t.Errorf("RawQuery = %q, want %q", req.RawQuery, tc.wantQuery)
			}
			if req.PathParam != strings.ToLower(tc.param) {
				t.Errorf("PathParam = %q, want lower-case %q", req.PathParam, tc.param)
			}
			// Canonical means a fixed point: validating it again changes nothing.
			again, err := routeByName(t, tc.route).Validate(req.PathParam, req.RawQuery)
			if err != nil || again.Key != req.Key {
				t.Errorf("revalidate: %v, key %q, want %q", err, again.Key, req.Key)
			}
		})
	}
}

func TestValidateSameMeaningSameKey(t *testing.T) {
	ob := routeByName(t, OrderBookEvents)
	pairs := [][2]string{
		{"tokenId=a,b", "tokenId=b&tokenId=a"},
		{"marketId=1&order=DESC", "order=desc&marketId=1"},
		{"marketId=1", "marketId=1&order=asc&limit=1000"},
		{"conditionId=0xAB", "conditionId=0xab"},
	}
	for _, p := range pairs {
		a, err1 := ob.Validate("", p[0])
		b, err2 := ob.Validate("", p[1])
		if err1 != nil || err2 != nil || a.Key != b.Key {
			t.Errorf("%q and %q: keys %v / %v (%v, %v)", p[0], p[1], a, b, err1, err2)
		}
	}
	act := routeByName(t, Activity)
	a, _ := act.Validate(addr, "")
	b, _ := act.Validate("0x"+strings.ToUpper(addr[2:]), "limit=20")
	if a.Key != b.Key {
		t.Errorf("address case: %q vs %q", a.Key, b.Key)
	}
}

func TestValidateRejects(t *testing.T) {
	many := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = "v" + strings.Repeat("1", i+1)
		}
		return strings.Join(parts, ",")
	}
	tests := []struct {
		name, route, param, query, msg string
	}{
		{"no filter", OrderBookEvents, "", "", msgFilterRequired},
		{"no filter only eventType", OrderBookEvents, "", "eventType=book", msgFilterRequired},
		{"21 marketIds", OrderBookEvents, "", "marketId=" + many(21), "Too many marketId values: at most 20"},
		{"21 conditionIds mixed forms", OrderBookEvents, "", "conditionId=" + many(20) + "&conditionId=x", "Too many conditionId values: at most 20"},
		{"51 tokenIds", OrderBookEvents, "", "tokenId=" + many(51), "Too many tokenId values: at most 50"},
		{"bad eventType", OrderBookEvents, "", "marketId=1&eventType=trade", "Invalid eventType: values must be book or price_change"},
		{"3 eventTypes", OrderBookEvents, "", "marketId=1&eventType=book,price_change,book", "Too many eventType values: at most 2"},
		{"from not integer", OrderBookEvents, "", "marketId=1&from=1.5", "Invalid from: must be a non-negative integer"},
		{"to negative", OrderBookEvents, "", "marketId=1&to=-1", "Invalid to: must be a non-negative integer"},
		// Digits only: no sign, no leading zero, so that no proxy in front
		// can read a number differently from the edge.
		{"from leading zero", OrderBookEvents, "", "marketId=1&from=010", "Invalid from: must be a non-negative integer"},
		{"to plus sign", OrderBookEvents, "", "marketId=1&to=%2B20", "Invalid to: must be a non-negative integer"},
		{"limit plus sign", OrderBookEvents, "", "marketId=1&limit=%2B5", "Invalid limit: must be an integer from 1 to 10000"},
		{"limit leading zero", OrderBookEvents, "", "marketId=1&limit=007", "Invalid limit: must be an integer from 1 to 10000"},
		{"activity limit leading zero", Activity, addr, "limit=020", "Invalid limit: must be an integer from 1 to 100"},
		{"block with spaces", Activity, addr, "fromBlock=%201", "Invalid fromBlock: must be a non-negative integer"},
		// Integers are int64 (docs/openapi.json): one past the largest is
		// refused, not wrapped.
		{"from past int64", OrderBookEvents, "", "marketId=1&from=9223372036854775808", "Invalid from: must be a non-negative integer"},
		{"to 20 digits", OrderBookEvents, "", "marketId=1&to=10000000000000000000", "Invalid to: must be a non-negative integer"},
		{"block far past int64", Activity, addr, "toBlock=99999999999999999999", "Invalid toBlock: must be a non-negative integer"},
		{"to before from", OrderBookEvents, "", "marketId=1&from=5&to=4", "Invalid range: to must be >= from"},
		{"bad order", OrderBookEvents, "", "marketId=1&order=up", "Invalid order: must be asc or desc"},
		{"limit 0", OrderBookEvents, "", "marketId=1&limit=0", "Invalid limit: must be an integer from 1 to 10000"},
		{"limit 10001", OrderBookEvents, "", "marketId=1&limit=10001", "Invalid limit: must be an integer from 1 to 10000"},
		{"limit text", OrderBookEvents, "", "marketId=1&limit=ten", "Invalid limit: must be an integer from 1 to 10000"},
		{"limit twice", OrderBookEvents, "", "marketId=1&limit=1&limit=2", "Invalid limit: given more than once"},
		{"bad filter value", OrderBookEvents, "", "marketId=a%20b", "Invalid marketId value"},
		{"long filter value", OrderBookEvents, "", "tokenId=" + strings.Repeat("1", 129), "Invalid tokenId value"},
		{"cursor control char", OrderBookEvents, "", "marketId=1&cursor=a%00b", "Invalid cursor"},
		{"cursor too long", OrderBookEvents, "", "marketId=1&cursor=" + strings.Repeat("a", 1025), "Invalid cursor"},
		{"bad query escape", OrderBookEvents, "", "marketId=%zz", "Invalid query string"},
		{"address short", Activity, "0x123", "", msgInvalidAddress},
		{"address no 0x", Activity, strings.Repeat("1", 42), "", msgInvalidAddress},
		{"address not hex", Activity, "0x" + strings.Repeat("g", 40), "", msgInvalidAddress},
		{"activity limit 0", Activity, addr, "limit=0", "Invalid limit: must be an integer from 1 to 100"},
		{"activity limit negative", Activity, addr, "limit=-5", "Invalid limit: must be an integer from 1 to 100"},
		{"activity txHash", Activity, addr, "txHash=0x12", msgInvalidTxHash},
		{"activity fromBlock", Activity, addr, "fromBlock=x", "Invalid fromBlock: must be a non-negative integer"},
		{"activity block range", Activity, addr, "fromBlock=9&toBlock=1", "Invalid range: toBlock must be >= fromBlock"},
		{"activity time range", Activity, addr, "fromTimestamp=9&toTimestamp=1", "Invalid range: toTimestamp must be >= fromTimestamp"},
		{"transfers type", depositsWithdrawals, addr, "type=refund", "Invalid type: must be deposit or withdrawal"},
		{"transfers minAmount", depositsWithdrawals, addr, "minAmount=-1", "Invalid minAmount: must be a non-negative decimal"},
		{"transfers minAmount exp", depositsWithdrawals, addr, "minAmount=1e3", "Invalid minAmount: must be a non-negative decimal"},
		{"transfers limit 101", depositsWithdrawals, addr, "limit=101", "Invalid limit: must be an integer from 1 to 100"},
		{"transfers time", depositsWithdrawals, addr, "toTimestamp=abc", "Invalid toTimestamp: must be a non-negative integer"},
		{"combo limit", comboPositionsClosed, addr, "limit=101", "Invalid limit: must be an integer from 1 to 100"},
		{"closed limit", positionsClosed, addr, "limit=0", "Invalid limit: must be an integer from 1 to 100"},
		{"open limit", positionsOpen, addr, "limit=1000", "Invalid limit: must be an integer from 1 to 100"},
		{"open bad address", positionsOpen, "0xzz", "", msgInvalidAddress},
		{"tx short", tx, "0x1234", "", msgInvalidTxHash},
		{"tx address-length", tx, addr, "", msgInvalidTxHash},
		{"wallet bad", walletAddress, "activity", "", msgInvalidAddress},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := routeByName(t, tc.route).Validate(tc.param, tc.query)
			e, ok := errors.AsType[*Error](err)
			if !ok || e.Message != tc.msg {
				t.Fatalf("Validate(%q, %q) = %v; want *Error %q", tc.param, tc.query, err, tc.msg)
			}
		})
	}
}

// TestParseDigitsInt64 reads every integer up to the largest int64, as
// docs/openapi.json's format int64 allows, and nothing past it.
func TestParseDigitsInt64(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"999999999999999999", 999999999999999999, true},
		{"1000000000000000000", 1000000000000000000, true},
		{"9223372036854775807", math.MaxInt64, true},
		{"9223372036854775808", 0, false},
		{"9223372036854775810", 0, false},
		{"9999999999999999999", 0, false},
		{"10000000000000000000", 0, false},
		{"01", 0, false},
	} {
		got, ok := parseDigits(tc.in)
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseDigits(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	r := routeByName(t, OrderBookEvents)
	if _, err := r.Validate("", "marketId=1&from=9223372036854775807"); err != nil {
		t.Errorf("from=MaxInt64: %v", err)
	}
}

func TestRequestUpstreamPath(t *testing.T) {
	req, err := routeByName(t, Activity).Validate("0x"+strings.ToUpper(addr[2:]), "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := req.UpstreamPath(), "/v1/trader/"+addr+"/activity"; got != want {
		t.Errorf("UpstreamPath = %q, want %q", got, want)
	}
	if got, want := string(req.AppendUpstreamURL([]byte("x"), "http://legacy/api"))[1:], "http://legacy/api/v1/trader/"+addr+"/activity?limit=20"; got != want {
		t.Errorf("AppendUpstreamURL = %q, want %q", got, want)
	}
	req, _ = routeByName(t, OrderBookEvents).Validate("", "marketId=1")
	if got := req.UpstreamPath(); got != "/v1/orderbook/events" {
		t.Errorf("UpstreamPath = %q", got)
	}
	if got, want := string(req.AppendUpstreamURL([]byte("x"), "http://legacy/api"))[1:], "http://legacy/api/v1/orderbook/events?"+req.RawQuery; got != want || req.RawQuery == "" {
		t.Errorf("AppendUpstreamURL = %q, want %q", got, want)
	}
	// No query: no "?".
	req, _ = routeByName(t, tx).Validate(hash, "")
	if got, want := string(req.AppendUpstreamURL([]byte("x"), "http://legacy/api"))[1:], "http://legacy/api/v1/tx/"+hash; got != want {
		t.Errorf("AppendUpstreamURL = %q, want %q", got, want)
	}
}

func TestRequestPolicyInputs(t *testing.T) {
	req, _ := routeByName(t, Activity).Validate(addr, "toBlock=5&toTimestamp=100&cursor=abc")
	if !req.Cursor || !req.HasUpper || req.UpperIsBlock || req.Upper != 100 {
		t.Errorf("activity: cursor %v upper %v %d block %v", req.Cursor, req.HasUpper, req.Upper, req.UpperIsBlock)
	}
	req, _ = routeByName(t, Activity).Validate(addr, "toBlock=5")
	if !req.HasUpper || !req.UpperIsBlock || req.Upper != 5 {
		t.Errorf("toBlock only: upper %v %d block %v", req.HasUpper, req.Upper, req.UpperIsBlock)
	}
	req, _ = routeByName(t, OrderBookEvents).Validate("", "marketId=1&to=1700000000000")
	if req.Cursor || !req.HasUpper || req.Upper != 1700000000000 {
		t.Errorf("orderbook: %+v", req)
	}
}

func FuzzValidate(f *testing.F) {
	f.Add(0, "", "tokenId=1,2&eventType=book&order=DESC&limit=5")
	f.Add(1, addr, "limit=500&marketIds=1,2&txHash="+hash)
	f.Add(2, addr, "type=Deposit&minAmount=1.5&fromTimestamp=1&toTimestamp=2")
	f.Add(6, hash, "")
	f.Add(7, addr, "cursor=%2B%2F")
	f.Add(8, "", "tokenId=0") // the book: an absent depth stays absent
	f.Fuzz(func(t *testing.T, idx int, param, query string) {
		routes := NewTable().Routes()
		rt := routes[uint(idx)%uint(len(routes))]
		req, err := rt.Validate(param, query)
		if err != nil {
			e, ok := errors.AsType[*Error](err)
			if !ok || e.Message == "" {
				t.Fatalf("error %v is not an *Error with a message", err)
			}
			// What the client gets is valid JSON in the variant A failure
			// form: the edge writes every error body with AppendError.
			body := normalize.AppendError(nil, e.Message)
			var env struct {
				Message    *string         `json:"message"`
				StatusCode *string         `json:"status_code"`
				Data       json.RawMessage `json:"data"`
			}
			if jerr := json.Unmarshal(body, &env); jerr != nil || env.Message == nil ||
				*env.Message != e.Message || env.StatusCode == nil || *env.StatusCode != "0" || string(env.Data) != "null" {
				t.Fatalf("error body %q is not a variant A failure (%v)", body, jerr)
			}
			return
		}
		// The canonical form is a fixed point and never carries unknown names.
		again, err := rt.Validate(req.PathParam, req.RawQuery)
		if err != nil || again.Key != req.Key {
			t.Fatalf("canonical %q does not revalidate to itself: %v", req.RawQuery, err)
		}
	})
}

// Match agrees with the plainest reading of the table: split the path on
// every "/", and among routes with as many segments whose literals all
// equal the path's and whose parameter is not empty, take the one whose
// parameter sits latest.
func FuzzMatch(f *testing.F) {
	for _, p := range []string{"/v1/trader/" + addr + "/activity", "/v1/trader/wallet-address/activity", "/v1/tx/" + hash, "/v1//tx", "/", "", "//", "/v1/orderbook/events/", "/a/b/c/d/e/f/g/h/i"} {
		f.Add(p)
	}
	rt := NewTable()
	f.Fuzz(func(t *testing.T, path string) {
		var want *Route
		wantParam, wantScore := "", -1
		if strings.HasPrefix(path, "/") {
			parts := strings.Split(path[1:], "/")
			for _, r := range rt.routes {
				if len(r.segs) != len(parts) {
					continue
				}
				param, score, ok := "", len(parts), true
				for i, seg := range r.segs {
					switch {
					case strings.HasPrefix(seg, "{") && parts[i] != "":
						param, score = parts[i], i
					case seg != parts[i]:
						ok = false
					}
				}
				if ok && score > wantScore {
					want, wantParam, wantScore = r, param, score
				}
			}
		}
		got, param := rt.Match(path)
		if got != want || param != wantParam {
			t.Fatalf("Match(%q) = %v %q, want %v %q", path, got, param, want, wantParam)
		}
	})
}
