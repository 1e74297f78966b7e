package route

import "testing"

func TestMatchLegacy(t *testing.T) {
	tb := NewTable()
	tests := []struct{ path, route, param string }{
		{"/open-api/v1/tx/" + hash, tx, hash},
		{"/open-api/v1/trader/" + addr + "/activity", Activity, addr},
		{"/open-api/v1/trader/wallet-address/" + addr, walletAddress, addr},
		{"/open-api/v1/orderbook/events", OrderBookEvents, ""},
		// The edge's own extension has no legacy path.
		{"/open-api/v1/orderbook/book", "", ""},
		{"/v1/tx/" + hash, "", ""},
		{"/open-api/v2/tx/" + hash, "", ""},
		{"/open-apiv1/tx/" + hash, "", ""},
	}
	for _, tc := range tests {
		r, param := tb.MatchLegacy(tc.path)
		name := ""
		if r != nil {
			name = r.Name
		}
		if name != tc.route || param != tc.param {
			t.Errorf("MatchLegacy(%q) = %q, %q; want %q, %q", tc.path, name, param, tc.route, tc.param)
		}
	}
}

func TestLegacyRequest(t *testing.T) {
	tests := []struct {
		route, param, query           string
		wantKey, wantQuery, successor string
	}{
		// The legacy host's own activity default (50) where none is given;
		// a given page size is kept.
		{Activity, addr, "", "B:activity " + addr + "?limit=50", "limit=50", "/v1/trader/" + addr + "/activity?limit=50"},
		{Activity, addr, "limit=20&cursor=abc", "B:activity " + addr + "?cursor=abc&limit=20", "cursor=abc&limit=20", "/v1/trader/" + addr + "/activity?cursor=abc&limit=20"},
		{OrderBookEvents, "", "tokenId=b,a&x=1", "B:orderbook_events ?tokenId=a,b&order=asc&limit=1000", "tokenId=a,b&order=asc&limit=1000", "/v1/orderbook/events?tokenId=a,b&order=asc&limit=1000"},
		{tx, "0x" + "AB" + hash[4:], "", "B:tx 0xab" + hash[4:] + "?", "", "/v1/tx/0xab" + hash[4:]},
	}
	for _, tc := range tests {
		var req Request
		if err := routeByName(t, tc.route).ValidateLegacyInto(&req, tc.param, tc.query); err != nil {
			t.Fatalf("%s %q: %v", tc.route, tc.query, err)
		}
		if !req.Legacy || req.Key != tc.wantKey || req.RawQuery != tc.wantQuery || req.SuccessorPath() != tc.successor {
			t.Errorf("%s %q: legacy %v key %q query %q successor %q; want key %q query %q successor %q",
				tc.route, tc.query, req.Legacy, req.Key, req.RawQuery, req.SuccessorPath(), tc.wantKey, tc.wantQuery, tc.successor)
		}
		var v1 Request
		if err := routeByName(t, tc.route).ValidateInto(&v1, tc.param, tc.query); err != nil {
			t.Fatal(err)
		}
		if v1.Legacy || v1.Key == req.Key {
			t.Errorf("%s: the /v1 request shares the legacy key %q", tc.route, req.Key)
		}
	}
	// The same rules: a bad request is the same 400 on both.
	var req Request
	err := routeByName(t, Activity).ValidateLegacyInto(&req, addr, "limit=0")
	if err == nil || err.(*Error).Message != "Invalid limit: must be an integer from 1 to 100" {
		t.Errorf("limit=0: %v", err)
	}
}
