package legacysim_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"tradergate/legacysim"
)

func ExampleNew() {
	end := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	sim := legacysim.New(legacysim.Config{
		Seed: 7,
		Key:  "demo-key",
		End:  end,
		Now:  func() time.Time { return end },
	})
	srv := httptest.NewServer(sim)
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/open-api/v1/tx/0x"+fmt.Sprintf("%064x", 1), nil)
	req.Header.Set("Authorization", "Bearer demo-key")
	resp, err := srv.Client().Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)

	fmt.Println(len(sim.Wallets()), "wallets,", len(sim.Markets()), "markets")
	fmt.Println(resp.StatusCode, string(body))
	fmt.Println(sim.Stats().ByRoute["tx"], "request to tx")
	// Output:
	// 16 wallets, 8 markets
	// 200 {"success":true,"code":"0","message":"success","data":null}
	// 1 request to tx
}
