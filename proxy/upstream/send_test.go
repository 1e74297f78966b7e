package upstream

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestSendAsClientDo: send answers as client.Do with noRedirects does, on
// the same requests: the answer it returns (a redirect not followed, with
// or without a Location), the *url.Error it fails with (an unparsable
// Location, a host that refuses the connection, a password in the URL
// masked), and the header the legacy host receives.
func TestSendAsClientDo(t *testing.T) {
	var got []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Clone())
		switch r.URL.Path {
		case "/found":
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(http.StatusFound)
		case "/bare":
			w.WriteHeader(http.StatusTemporaryRedirect)
		case "/bad":
			w.Header().Set("Location", "http://[::1%zz]/x")
			w.WriteHeader(http.StatusMovedPermanently)
		default:
			w.Write([]byte(`{"ok":true}`))
		}
	}))
	defer srv.Close()
	// A port nothing listens on: the connection is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://user:secret@" + ln.Addr().String()
	ln.Close()

	u := newLegacyHost(Config{BaseURL: srv.URL, Key: "k", MaxBodyBytes: 1 << 20, DialTimeout: time.Second, Compression: compressionNone}, nil)
	defer u.close()
	for _, target := range []string{srv.URL + "/ok", srv.URL + "/found", srv.URL + "/bare", srv.URL + "/bad", refused + "/x"} {
		got = got[:0]
		mine, err := http.NewRequestWithContext(t.Context(), http.MethodGet, target, nil)
		if err != nil {
			t.Fatal(err)
		}
		mine.Header = http.Header{"Authorization": u.auth, "Accept": acceptJSON, "User-Agent": userAgent, "X-Request-Id": {"r1"}}
		theirs := mine.Clone(t.Context())
		theirs.Header = http.Header{}
		for k, v := range mine.Header {
			theirs.Header.Set(k, v[0])
		}
		resp1, err1 := u.send(mine)
		resp2, err2 := u.client.Do(theirs)
		switch {
		case (err1 == nil) != (err2 == nil):
			t.Fatalf("%s: send %v, client.Do %v", target, err1, err2)
		case err1 != nil:
			if err1.Error() != err2.Error() {
				t.Errorf("%s: send failed with %q, client.Do with %q", target, err1, err2)
			}
		default:
			if resp1.StatusCode != resp2.StatusCode || resp1.Header.Get("Location") != resp2.Header.Get("Location") {
				t.Errorf("%s: send %d %q, client.Do %d %q", target, resp1.StatusCode, resp1.Header.Get("Location"), resp2.StatusCode, resp2.Header.Get("Location"))
			}
			resp1.Body.Close()
			resp2.Body.Close()
			if len(got) != 2 {
				t.Fatalf("%s: the host saw %d requests, want 2 (no redirect followed)", target, len(got))
			}
			for _, h := range got {
				h.Del("Accept-Encoding") // the transport's own: DisableCompression
			}
			for k := range got[1] {
				if got[0].Get(k) != got[1].Get(k) {
					t.Errorf("%s: %s %q from send, %q from client.Do", target, k, got[0].Get(k), got[1].Get(k))
				}
			}
		}
	}
}
