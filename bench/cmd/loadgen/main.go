// Command loadgen runs one load run of the benchmark (package
// tradergate/bench/load) and writes its result as JSON. The orchestrator
// (go run ./bench) starts it pinned to the load generator's CPU with
// GOMAXPROCS=1, one process per row, so that its CPU never mixes with the
// server's.
//
//	loadgen -spec spec.json -out result.json
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"tradergate/bench/load"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run() error {
	specPath := flag.String("spec", "", "run specification (JSON)")
	outPath := flag.String("out", "", "write the result (JSON) here")
	flag.Parse()

	data, err := os.ReadFile(*specPath)
	if err != nil {
		return err
	}
	var spec load.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("%s: %w", *specPath, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := load.Run(ctx, spec)
	if err != nil {
		return err
	}
	out, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(*outPath, out, 0o644)
}
