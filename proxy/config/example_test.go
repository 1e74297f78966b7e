package config_test

import (
	"fmt"

	"tradergate/proxy/config"
)

// Parse decodes strictly and fills defaults; Validate returns every
// problem at once (a configerr.List), each naming its field, placed on its
// line and column when the file holds it.
func ExampleParse() {
	cfg, err := config.Parse([]byte("upstream:\n  base_url: ftp://legacy\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Validate(func(string) string { return "" }))
	// Output:
	// line 1:1: upstream.key_env: environment variable TRADERGATE_UPSTREAM_KEY (the edge's legacy API key) is not set
	// line 2:3: upstream.base_url: must be an http(s) URL without query or credentials, got "ftp://legacy"
	// keys: at least one key is required (hash one with `tradergate hash-key`)
}
