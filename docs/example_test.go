package docs_test

import (
	"encoding/json"
	"fmt"

	"tradergate/docs"
)

func ExampleOpenAPI() {
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]struct {
			Get struct {
				Route string `json:"x-route-name"`
			} `json:"get"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(docs.OpenAPI(), &doc); err != nil {
		panic(err)
	}
	fmt.Println(doc.OpenAPI, len(doc.Paths))
	fmt.Println(doc.Paths["/v1/tx/{txHash}"].Get.Route)
	// Output:
	// 3.1.0 21
	// tx
}
