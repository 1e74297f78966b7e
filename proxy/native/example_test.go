package native_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"tradergate/docs"
	"tradergate/proxy/native"
	"tradergate/proxy/route"
)

func ExampleNew() {
	cfg := native.Config{
		BaseURL: "https://native.internal",
		KeyEnv:  "TRADERGATE_NATIVE_KEY",
		Routes: map[string]native.RouteConfig{
			route.Activity:   {Mode: native.ModeShadow},
			"tx":             {Mode: native.ModeCanary, Percent: 10},
			"positions_open": {Mode: native.ModeNative},
		},
	}
	cfg.ApplyDefaults()
	getenv := func(string) string { return "the edge's credential" }
	if errs := cfg.Validate(getenv); errs != nil {
		fmt.Println(errs)
		return
	}
	b, err := native.New(cfg, native.Options{
		Routes:   route.NewTable().Routes(),
		OpenAPI:  docs.OpenAPI(),
		Registry: prometheus.NewRegistry(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	fmt.Println("positions_open:", b.Decide("positions_open", "key-a"))
	fmt.Println("activity:", b.Decide(route.Activity, "key-a"))
	for _, r := range b.Report().Routes {
		if r.Mode != native.ModeLegacy {
			fmt.Printf("%s %s sample=%v percent=%v\n", r.Route, r.Mode, r.Sample, r.Percent)
		}
	}
	// Output:
	// positions_open: native
	// activity: legacy
	// activity shadow sample=1 percent=0
	// positions_open native sample=1 percent=0
	// tx canary sample=1 percent=10
}
