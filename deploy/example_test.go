package deploy_test

import (
	"fmt"
	"strings"

	"tradergate/deploy"
)

func ExampleExpressions() {
	exprs, err := deploy.Expressions()
	if err != nil {
		panic(err)
	}
	for _, e := range exprs {
		if strings.Contains(e.Source, `"Legacy calls per request" `) {
			fmt.Println(e.Source)
			fmt.Println(e.Query)
		}
	}
	// Output:
	// grafana/tradergate.json: panel "Legacy calls per request" (id 14) target A
	// sum(rate(tradergate_upstream_requests_total{route=~".+"}[1m])) / sum(rate(tradergate_requests_total{route=~".+"}[1m]))
}
