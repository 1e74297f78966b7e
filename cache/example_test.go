package cache_test

import (
	"context"
	"fmt"

	"tradergate/cache"
	"tradergate/normalize"
)

// A wallet lookup that finds nothing is kept for negative_ttl; the second
// call is served from memory without a fetch.
func ExampleNew() {
	c, err := cache.New(cache.Config{}, cache.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	fetches := 0
	fetch := func(context.Context, func() bool) ([]byte, cache.Facts, error) {
		fetches++
		body := []byte(`{"message":"OK","status_code":"1","data":{"walletAddress":null}}`)
		return body, cache.Facts{Route: "wallet_address", Class: normalize.ClassLookup, Meta: normalize.Meta{DataNull: true}}, nil
	}
	ctx := context.Background()
	key := "wallet_address|0x00000000000000000000000000000000000000aa"
	r, _ := c.Get(ctx, key, fetch)
	fmt.Println(r.Status, r.Entry.TTL, r.Entry.Immutable)
	r, _ = c.Get(ctx, key, fetch)
	fmt.Println(r.Status, fetches)
	// Output:
	// MISS 2s false
	// HIT 1
}
