package fleet_test

import (
	"fmt"
	"os"

	"tradergate/proxy/fleet"
)

func ExampleOpen() {
	cfg := fleet.Config{Addrs: []string{"127.0.0.1:6379"}, PasswordEnv: "TRADERGATE_REDIS_PASSWORD"}
	cfg.ApplyDefaults()
	getenv := func(name string) string {
		if name == "TRADERGATE_REDIS_PASSWORD" {
			return "from-the-environment" // os.Getenv in the edge
		}
		return os.Getenv(name)
	}
	// Open does not contact Redis: a Redis that is down at start costs the
	// replica nothing but its sharing.
	conn, err := fleet.Open(cfg, getenv, fleet.Options{})
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	fmt.Println(conn.Key("rl"), conn.Timeout(), conn.State())
	// Output: tradergate:rl 50ms closed
}
