package openapitest_test

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"
)

// TestStreamsAnswerPerContract holds the streams' answers to
// docs/openapi.json: each stream's head, with the bytes up to its first
// event as the body (a stream's body does not end), its HEAD, and its
// refusals.
func TestStreamsAnswerPerContract(t *testing.T) {
	e := newEdgeWith(t, "5s", "streams: {max_per_key: 2}\n")
	tok := e.sim.Markets()[0].Tokens[0]
	w := e.sim.Wallets()[0]
	streams := []string{
		"/v1/orderbook/stream?tokenId=" + tok + "&from=0",
		"/v1/trader/" + w + "/activity/stream?fromTimestamp=0",
		"/v1/trader/" + w + "/deposits-withdrawals/stream?fromTimestamp=0",
	}
	for _, path := range streams {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+keyAll)
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		// The retry field, then the first event.
		var body bytes.Buffer
		r := bufio.NewReader(resp.Body)
		for blanks := 0; blanks < 2; {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: %v after %q", path, err, body.String())
			}
			body.WriteString(line)
			if line == "\n" {
				blanks++
			}
		}
		resp.Body.Close()
		cancel()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body.Bytes(), []byte("\nid: ")) {
			t.Fatalf("%s: %d %q", path, resp.StatusCode, body.String())
		}
		e.v.Response(t, req, resp, body.Bytes())
		e.checkAs(t, http.MethodHead, path, keyAll, http.StatusOK)
	}
	e.check(t, "/v1/orderbook/stream", http.StatusBadRequest)
	e.check(t, "/v1/orderbook/stream?tokenId="+tok, http.StatusBadRequest, "Last-Event-ID", "x")
	e.check(t, "/v1/trader/"+w+"/activity/stream?cursor=nope", http.StatusBadRequest)
	e.checkAs(t, http.MethodGet, streams[0], "", http.StatusUnauthorized)
	e.checkAs(t, http.MethodGet, streams[0], keyTxOnly, http.StatusForbidden)
	e.checkAs(t, http.MethodPost, streams[0], keyAll, http.StatusMethodNotAllowed)

	// Past the key's cap of open streams: 429, held open by two.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+streams[0], nil)
		req.Header.Set("Authorization", "Bearer "+keyAll)
		resp, err := e.client.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%v %v", resp, err)
		}
		defer resp.Body.Close()
	}
	e.check(t, streams[0], http.StatusTooManyRequests)
	e.checkAs(t, http.MethodHead, streams[0], keyAll, http.StatusOK)
}
