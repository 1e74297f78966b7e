// Package legacysim is a simulated legacy host: an http.Handler that
// speaks variant B (docs/CONTRACT.md#envelopes, normalize/SHAPES.md) for
// the eight legacy endpoints (docs/CONTRACT.md#routes) under the /open-api
// base path, over deterministic synthetic data derived from a seed.
//
// It is the upstream of the demo, of the end-to-end and fault tests, and
// of load benchmarks: it counts and records what reaches it (Stats,
// Recent), injects faults on request (SetFaults), and keeps its answers
// cheap (items are encoded once, pages are appends).
//
// Time is the sim's clock (Config.Now): an item stamped after now is not
// visible yet. In live mode (Config.Live, live.go) the data goes on past
// End as the clock passes it, new order book events, trades and transfers
// at the configured rates, while every page of the past answers the same
// bytes and every cursor keeps its position; the data at an instant never
// depends on what was asked before. What the host answered to each
// request, at which instant, is kept by the journal (Config.Journal,
// journal.go): a record per request, not a rendering after the fact, so
// that a checker of the edge compares against what was really said,
// faults included.
package legacysim

import (
	"crypto/subtle"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
)

// Config sets up a Sim; the zero value is a usable default.
type Config struct {
	Seed    int64            // data seed; 0 means 1. Same Config (End included) -> same data, byte for byte.
	Key     string           // when set, requests must carry "Authorization: Bearer <Key>", else variant B 401
	Now     func() time.Time // the sim's clock; items stamped after Now() are not visible yet. nil: time.Now
	End     time.Time        // time of the newest generated data; zero: Now() at New, truncated to the second
	History time.Duration    // span of generated data before End; zero (or negative): 72h
	Wallets int              // wallets; zero (or negative): 16
	Markets int              // markets of two outcome tokens (Yes, No) each; zero (or negative): 8
	// OrderBookVariety: order book events exercise every case of a book
	// rebuild (variety.go: sparse snapshots, dense deltas, removals of
	// absent levels, "0.5" and "0.50", crossed books). About 10,000
	// events an hour per token: pair it with a History of a few hours.
	// false: the default books, unchanged.
	OrderBookVariety bool
	// Live, when set, keeps the data growing past End as the clock passes
	// it: new order book events, trades and transfers at its rates
	// (live.go). nil: the data ends at End.
	Live *Live
	// Journal records every request and its answer (Journal, journal.go).
	Journal bool
}

// Sim is the simulated legacy host. It is safe for concurrent use.
type Sim struct {
	seed       uint64
	key        string
	variety    bool // Config.OrderBookVariety
	now        func() time.Time
	start, end time.Time
	startS     int64 // Unix s of start and end
	endS       int64

	markets []market
	tokens  []token
	wallets []wallet

	walletByAddr map[string]int // wallet address -> index
	signerOf     map[string]int // signer address -> wallet index
	marketByID   map[string]int
	marketByCond map[string]int // lower-case conditionId
	tokenByID    map[string]int
	txs          map[string]txRef // lower-case hash

	live    *liveRates // Config.Live; nil when off
	liveTxs sync.Map   // live trade hash -> txRef, live mode only
	journal *journal   // Config.Journal; nil when off

	faults atomic.Pointer[faultState]
	stats  counters
	sinks  sync.Pool // *sink
	gzips  sync.Pool // *gzip.Writer
}

// New generates the data of cfg: markets and wallets with their activity,
// transfers, positions and combos at once (about a millisecond with
// defaults), order books per token on first use.
func New(cfg Config) *Sim {
	s := &Sim{seed: uint64(cfg.Seed), key: cfg.Key, now: cfg.Now, variety: cfg.OrderBookVariety}
	if s.seed == 0 {
		s.seed = 1
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.end = cfg.End
	if s.end.IsZero() {
		s.end = s.now().Truncate(time.Second)
	}
	hist := cfg.History
	if hist <= 0 {
		hist = 72 * time.Hour
	}
	s.start = s.end.Add(-hist)
	s.startS, s.endS = s.start.Unix(), s.end.Unix()
	nw, nm := cfg.Wallets, cfg.Markets
	if nw <= 0 {
		nw = 16
	}
	if nm <= 0 {
		nm = 8
	}

	s.genMarkets(nm)
	s.marketByID = make(map[string]int, nm)
	s.marketByCond = make(map[string]int, nm)
	s.tokenByID = make(map[string]int, 2*nm)
	for i, m := range s.markets {
		s.marketByID[m.id] = i
		s.marketByCond[m.cond] = i
	}
	for i := range s.tokens {
		s.tokenByID[s.tokens[i].id] = i
	}

	s.wallets = make([]wallet, nw)
	s.walletByAddr = make(map[string]int, nw)
	s.signerOf = make(map[string]int, nw)
	s.txs = make(map[string]txRef)
	for wi := range s.wallets {
		w := &s.wallets[wi]
		s.genWallet(w, wi)
		s.walletByAddr[w.addr] = wi
		s.signerOf[w.signer] = wi
		for i := range w.acts {
			s.txs[w.acts[i].tx] = txRef{wallet: wi, idx: i}
		}
		for i := range w.combos {
			s.txs[w.combos[i].tx] = txRef{wallet: wi, idx: i, combo: true}
		}
	}

	if cfg.Live != nil {
		s.live = newLiveRates(cfg.Live)
		for wi := range s.wallets {
			s.wallets[wi].live = s.newLiveWallet(wi)
		}
	}
	if cfg.Journal {
		s.journal = &journal{}
	}
	s.faults.Store(&faultState{rate: 1})
	s.sinks.New = func() any { return &sink{b: make([]byte, 0, 64<<10)} }
	s.gzips.New = func() any {
		// BestSpeed: the sim is the upstream of load benchmarks and must
		// not be their bottleneck.
		z, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
		return z
	}
	return s
}

// ServeHTTP answers one request: count and record it, apply the faults in
// scope, then route, check method and key, validate and answer.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, arg := matchRoute(r.URL.Path)
	s.stats.arrive(rt, r)
	defer s.stats.leave()

	fs := s.faults.Load()
	inScope := fs.applies(rt)
	if inScope {
		if !fs.wait(r.Context()) {
			s.record(r, s.now(), 0, nil, false)
			return
		}
		if fs.f.Hang {
			<-r.Context().Done()
			s.record(r, s.now(), 0, nil, false)
			return
		}
	}
	k := s.getSink()
	defer s.putSink(k)
	now := s.now()
	if inScope && fs.fails() {
		k.b = appendFailure(k.b, &apiError{fs.f.FailStatus, statusMessage(fs.f.FailStatus)})
		s.write(w, r, now, fs.f.FailStatus, k.b, fs.f.RetryAfter, false)
		return
	}

	body, apiErr := s.answer(rt, arg, r, now, append(k.b, okPrefix...))
	if apiErr != nil {
		if apiErr.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", http.MethodGet)
		}
		k.b = appendFailure(k.b[:0], apiErr)
		s.write(w, r, now, apiErr.status, k.b, 0, false)
		return
	}
	k.b = append(body, okSuffix...)
	if inScope {
		if fs.f.Malformed {
			k.b = append(k.b[:0], malformedBody...)
		}
		k.b = appendSpaces(k.b, fs.f.PadBytes)
	}
	s.write(w, r, now, http.StatusOK, k.b, 0, inScope && fs.f.Truncate)
}

// authorized checks the bearer key, the edge's own credential
// (docs/CONTRACT.md#authentication). The scheme
// is case-insensitive as in RFC 9110; the key is compared in constant time.
func (s *Sim) authorized(r *http.Request) bool {
	if s.key == "" {
		return true
	}
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") &&
		subtle.ConstantTimeCompare([]byte(strings.TrimSpace(key)), []byte(s.key)) == 1
}

// Wallets returns the simulated wallets (lower-case addresses), each with
// activity, transfers, positions and combos.
func (s *Sim) Wallets() []string {
	out := make([]string, len(s.wallets))
	for i := range s.wallets {
		out[i] = s.wallets[i].addr
	}
	return out
}

// Markets returns the simulated markets.
func (s *Sim) Markets() []Market {
	out := make([]Market, len(s.markets))
	for i := range s.markets {
		m := &s.markets[i]
		out[i] = Market{ID: m.id, ConditionID: m.cond, Slug: m.slug, Title: m.title, Resolved: m.resolved,
			Tokens: []string{s.tokens[m.tokens[0]].id, s.tokens[m.tokens[1]].id}}
	}
	return out
}

// Signers returns the signer -> proxy wallet mapping of wallet_address.
// Endpoint 8 also maps each wallet to itself (it resolves a signer or
// trader address, docs/CONTRACT.md#shape-wallet); those identities are not
// listed here.
func (s *Sim) Signers() map[string]string {
	out := make(map[string]string, len(s.signerOf))
	for signer, wi := range s.signerOf {
		out[signer] = s.wallets[wi].addr
	}
	return out
}

// TradeTxs returns the hashes of all TRADE transactions, the txHash of
// every activity item (redeems included), by wallet and then oldest
// first. Hashes stamped after Now() answer data null until then.
func (s *Sim) TradeTxs() []string {
	var out []string
	for wi := range s.wallets {
		acts := s.wallets[wi].acts
		for i := len(acts) - 1; i >= 0; i-- {
			out = append(out, acts[i].tx)
		}
	}
	return out
}

// ComboTxs returns the hashes of the COMBO transactions, one per closed
// combo position, by wallet and then in the reverse of combo_positions_closed'
// order.
func (s *Sim) ComboTxs() []string {
	var out []string
	for wi := range s.wallets {
		cs := s.wallets[wi].combos
		for i := len(cs) - 1; i >= 0; i-- {
			out = append(out, cs[i].tx)
		}
	}
	return out
}
