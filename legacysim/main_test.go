package legacysim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testEnd is the End of most test sims: a fixed instant keeps the data,
// and so the bytes, the same on every run.
var testEnd = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fixed returns a sim at testEnd whose clock stands at End, so that all
// data is visible, and an httptest server in front of it.
func fixed(t *testing.T, cfg Config) (*Sim, *httptest.Server) {
	t.Helper()
	if cfg.End.IsZero() {
		cfg.End = testEnd
	}
	if cfg.Now == nil {
		end := cfg.End
		cfg.Now = func() time.Time { return end }
	}
	s := New(cfg)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

type envelope struct {
	Success bool            `json:"success"`
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

type listData struct {
	Items      []json.RawMessage `json:"items"`
	NextCursor *string           `json:"nextCursor"`
}

type result struct {
	status int
	header http.Header
	body   []byte
	env    envelope
}

// get requests path with query q through the server's client and decodes
// the variant B envelope.
func get(t *testing.T, srv *httptest.Server, path string, q url.Values) result {
	t.Helper()
	u := srv.URL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return do(t, srv, http.MethodGet, u, nil)
}

func do(t *testing.T, srv *httptest.Server, method, u string, hdr http.Header) result {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	res := result{status: resp.StatusCode, header: resp.Header, body: body}
	if err := json.Unmarshal(body, &res.env); err != nil {
		t.Fatalf("%s %s: body is not JSON: %v\n%s", method, u, err, body)
	}
	return res
}

// ok asserts a variant B success and returns its data.
func (r result) ok(t *testing.T) json.RawMessage {
	t.Helper()
	if r.status != http.StatusOK || !r.env.Success || r.env.Code != "0" || r.env.Message != "success" {
		t.Fatalf("want variant B success, got %d %s", r.status, r.body)
	}
	return r.env.Data
}

// list asserts a success with a list payload.
func (r result) list(t *testing.T) listData {
	t.Helper()
	var l listData
	if err := json.Unmarshal(r.ok(t), &l); err != nil {
		t.Fatal(err)
	}
	if l.Items == nil {
		t.Fatalf("items is not an array: %s", r.body)
	}
	return l
}

// fail asserts a variant B failure with status and message.
func (r result) fail(t *testing.T, status int, msg string) {
	t.Helper()
	want := `{"success":false,"code":"` + itoa(status) + `","message":` + jsonString(msg) + `,"data":null}`
	if r.status != status || string(r.body) != want {
		t.Fatalf("want %d %s\ngot  %d %s", status, want, r.status, r.body)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// keys returns the keys of a JSON object in the order they appear.
func keys(t *testing.T, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", raw)
	}
	var ks []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return ks
}

// walk pages a list endpoint to the end with the given query, checking
// that every page respects limit, and returns all items.
func walk(t *testing.T, srv *httptest.Server, path string, q url.Values, limit int) []json.RawMessage {
	t.Helper()
	q = cloneValues(q)
	var all []json.RawMessage
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatal("paging does not end")
		}
		l := get(t, srv, path, q).list(t)
		if len(l.Items) > limit {
			t.Fatalf("page of %d items, limit %d", len(l.Items), limit)
		}
		all = append(all, l.Items...)
		if l.NextCursor == nil {
			return all
		}
		if len(l.Items) == 0 {
			t.Fatal("empty page with a nextCursor")
		}
		q.Set("cursor", *l.NextCursor)
	}
}

func field[T any](t *testing.T, raw json.RawMessage, name string) T {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(m[name], &v); err != nil {
		t.Fatalf("field %s of %s: %v", name, raw, err)
	}
	return v
}
