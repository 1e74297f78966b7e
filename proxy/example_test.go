package proxy_test

import (
	"fmt"

	"tradergate/proxy"
)

// A client key goes into keys[].sha256 as its SHA-256, never in plain text.
func ExampleHashKey() {
	fmt.Println(proxy.HashKey("hello"))
	// Output: 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824
}
