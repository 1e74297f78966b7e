// Command simserver serves the simulated legacy host (legacysim) on a port
// for the benchmark: the upstream of tradergate, nginx and the
// pass-through, and, as its own process, the "legacysim direct" baseline.
//
//	simserver -listen 127.0.0.1:9001 -key K -end 1767225600 -fixtures f.json
//
// Two instances started with the same -seed and -end hold the same data
// byte for byte. Besides legacysim's /open-api paths it alone serves:
//
//	GET /__stats          {"requests": n, "by_route": {...}}: what reached the host
//	GET /__faults?latency=100ms   set (or, without latency, clear) an answer delay
//
// The fixtures file names what the benchmark may ask for (wallets,
// transactions, tokens), written before the port opens. Once listening it
// prints its address, the upstream.base_url that points tradergate at it,
// and the key it expects (README "Running the edge against simserver").
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"tradergate/bench/cmd/internal/serve"
	"tradergate/bench/fixture"
	"tradergate/legacysim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "simserver:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on")
	seed := flag.Int64("seed", 1, "data seed")
	key := flag.String("key", "", "the bearer key the host requires")
	end := flag.Int64("end", 0, "Unix seconds of the newest data (0: now); give the same value to instances that must agree")
	fixtures := flag.String("fixtures", "", "write the fixtures JSON here before serving")
	liveBook := flag.Duration("live-book-every", 0, "live mode: each token's order book changes about this often, from now on (0: a fixed history, no live events); the fanout rows' host")
	flag.Parse()

	endT := time.Now().Truncate(time.Second)
	if *end > 0 {
		endT = time.Unix(*end, 0)
	}
	cfg := legacysim.Config{Seed: *seed, Key: *key, End: endT}
	if *liveBook > 0 {
		cfg.Live = &legacysim.Live{BookEvery: *liveBook}
	}
	sim := legacysim.New(cfg)
	if *fixtures != "" {
		if err := writeFixtures(*fixtures, sim, endT); err != nil {
			return err
		}
	}

	mux := http.NewServeMux()
	mux.Handle("/open-api/", sim)
	mux.HandleFunc("GET /__stats", func(w http.ResponseWriter, _ *http.Request) {
		st := sim.Stats()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"requests": st.Requests, "by_route": st.ByRoute, "max_in_flight": st.MaxInFlight})
	})
	mux.HandleFunc("GET /__faults", func(w http.ResponseWriter, r *http.Request) {
		var f legacysim.Faults
		if v := r.URL.Query().Get("latency"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			f.Latency = d
		}
		sim.SetFaults(f)
		fmt.Fprintf(w, "latency=%v\n", f.Latency)
	})

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	printReady(os.Stdout, ln.Addr().String(), *key)
	ctx, stop := serve.Signalled()
	defer stop()
	return serve.HTTP(ctx, ln, mux)
}

// printReady says where the host listens and how to point the edge at it.
func printReady(w io.Writer, addr, key string) {
	fmt.Fprintf(w, "simserver: listening on %s\n", addr)
	fmt.Fprintf(w, "upstream.base_url: \"http://%s/open-api\"\n", addr)
	if key == "" {
		fmt.Fprintln(w, "key: none (-key not given: any Authorization, or none, is accepted)")
		return
	}
	fmt.Fprintln(w, "key: the -key given; set it in the environment variable upstream.key_env names (TRADERGATE_UPSTREAM_KEY by default)")
}

// writeFixtures names what the host holds, for the orchestrator.
func writeFixtures(path string, sim *legacysim.Sim, end time.Time) error {
	f := fixture.Fixtures{End: end.Unix(), Wallets: sim.Wallets(), TradeTxs: sim.TradeTxs(), ComboTxs: sim.ComboTxs()}
	for _, m := range sim.Markets() {
		f.Tokens = append(f.Tokens, m.Tokens...)
	}
	return fixture.WriteJSON(path, f)
}
