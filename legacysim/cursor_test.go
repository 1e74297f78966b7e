package legacysim

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestCursorRoundTrip(t *testing.T) {
	r := newPRNG(7, 99, 0)
	special := 0
	for range 1000 {
		c := cursorPos{kind: cursorKind(1 + r.IntN(6)), ts: r.Int64(), a: r.Uint32(), b: r.Uint32()}
		s := string(appendCursor(nil, c))
		if len(s) != cursorLen || !strings.HasSuffix(s, "=") {
			t.Fatalf("cursor %q", s)
		}
		if strings.ContainsAny(s, "+/") {
			special++
		}
		got, ok := parseCursor(s, c.kind)
		if !ok || got != c {
			t.Fatalf("%q: got %+v, %v, want %+v", s, got, ok, c)
		}
		if _, ok := parseCursor(s, c.kind%6+1); ok {
			t.Fatalf("%q accepted as another kind", s)
		}
		// One changed character is rejected.
		b := []byte(s)
		b[r.IntN(cursorLen-2)] ^= 1
		if _, ok := parseCursor(string(b), c.kind); ok && string(b) != s {
			if d, _ := parseCursor(string(b), c.kind); d == c {
				t.Fatalf("%q and %q decode alike", s, b)
			}
		}
	}
	if special < 300 {
		t.Errorf("only %d of 1000 cursors contain '+' or '/'", special)
	}
	for _, bad := range []string{"", "AAAA", strings.Repeat("A", cursorLen), strings.Repeat("A", 26) + "==", "!" + strings.Repeat("A", 25) + "=="} {
		if _, ok := parseCursor(bad, curActivity); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Cursors with '+' and '/' survive url.Values encoding, and a client that
// forgets to escape them ('+' turns into a space) gets 400, not a wrong
// page.
func TestCursorURLEscaping(t *testing.T) {
	s, srv := fixed(t, Config{})
	var found string
	var path string
	for _, w := range s.Wallets() {
		path = "/open-api/v1/trader/" + w + "/activity"
		q := url.Values{"limit": {"1"}}
		for range 40 {
			l := get(t, srv, path, q).list(t)
			if l.NextCursor == nil {
				break
			}
			if strings.Contains(*l.NextCursor, "+") {
				found = *l.NextCursor
				break
			}
			q.Set("cursor", *l.NextCursor)
		}
		if found != "" {
			break
		}
	}
	if found == "" {
		t.Fatal("no cursor with '+' in 40 pages of any wallet")
	}
	enc := url.Values{"cursor": {found}, "limit": {"1"}}.Encode()
	if !strings.Contains(enc, "%2B") {
		t.Fatalf("encoded %q", enc)
	}
	r := do(t, srv, http.MethodGet, srv.URL+path+"?"+enc, nil)
	r.list(t)
	if rec := s.Recent(); rec[len(rec)-1].Query.Get("cursor") != found {
		t.Fatal("cursor changed on the way")
	}
	do(t, srv, http.MethodGet, srv.URL+path+"?limit=1&cursor="+found, nil).fail(t, http.StatusBadRequest, "Invalid cursor")
}

func FuzzParseCursor(f *testing.F) {
	f.Add(string(appendCursor(nil, cursorPos{kind: curOrderbook, ts: 1, a: 2, b: 3})))
	f.Add("AAAA")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		for k := curOrderbook; k <= curOpen; k++ {
			if c, ok := parseCursor(s, k); ok {
				if again := string(appendCursor(nil, c)); again != s {
					t.Fatalf("%q decodes to %+v, which encodes to %q", s, c, again)
				}
			}
		}
	})
}
