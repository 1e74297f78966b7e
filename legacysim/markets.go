package legacysim

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// Market is a fixture view of one simulated market.
type Market struct {
	ID, ConditionID, Slug, Title string
	Tokens                       []string // outcome token ids: Yes, then No
	Resolved                     bool
}

// market is the generated market with what the item encoders need.
type market struct {
	id, cond, slug, title, eventSlug, logo string
	resolved                               bool
	winner                                 int   // winning outcome index; resolved markets only
	resolveTs                              int64 // Unix s; resolved markets only
	yes                                    int64 // micro-USD: Yes price (current, or the last traded before resolution)
	feeBps                                 int64 // taker fee in basis points
	tokens                                 [2]int
}

// token is one outcome token. Its order book is generated on first use:
// tests that build many sims must stay cheap.
type token struct {
	market, outcome int
	id              string
	frag            []byte // constant part of its order book events, see orderbook.go
	once            sync.Once
	book            *tokenBook
	live            *liveBook // live mode: the book past End (live.go)
}

// outcomeName is the outcome label of an order book event's outcome and
// of positionSide (docs/CONTRACT.md#shapes): every simulated market is
// binary.
func outcomeName(i int) string {
	if i == 0 {
		return "Yes"
	}
	return "No"
}

// basePrice is the token's traded price before any resolution.
func (s *Sim) basePrice(tok int) int64 {
	t := &s.tokens[tok]
	yes := s.markets[t.market].yes
	if t.outcome == 0 {
		return yes
	}
	return micro - yes
}

// currentPrice is the token's price now: 1 USD or 0 once its market is
// resolved, the base price otherwise.
func (s *Sim) currentPrice(tok int) int64 {
	t := &s.tokens[tok]
	m := &s.markets[t.market]
	if !m.resolved {
		return s.basePrice(tok)
	}
	if m.winner == t.outcome {
		return micro
	}
	return 0
}

type titleTemplate struct{ title, event string }

// marketText makes a title and event slug from small word lists; the
// template and words come from r so that seeds differ visibly.
func marketText(r prng, end time.Time) titleTemplate {
	year := strconv.Itoa(end.Year())
	month := end.AddDate(0, 1+r.IntN(5), 0).Month().String()
	day := strconv.Itoa(1 + r.IntN(28))
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	switch r.IntN(4) {
	case 0:
		team, cup := pick("the Lakers", "the Celtics", "the Warriors", "the Knicks"), "NBA Finals"
		if r.IntN(2) == 0 {
			team, cup = pick("Arsenal", "Liverpool", "Chelsea", "Everton"), "Premier League"
		}
		return titleTemplate{"Will " + team + " win the " + year + " " + cup + "?", cup + " " + year + " winner"}
	case 1:
		asset := pick("Bitcoin", "Ethereum", "Solana", "Gold")
		level := strconv.Itoa(int(r.between(2, 30)) * 5000)
		return titleTemplate{"Will " + asset + " be above $" + level + " on " + month + " " + day + "?",
			asset + " above on " + month + " " + day}
	case 2:
		org := pick("Apple", "Nintendo", "SpaceX", "Netflix", "OpenAI")
		thing := pick("a new console", "a foldable phone", "an IPO", "a price cut", "a launch date")
		return titleTemplate{"Will " + org + " announce " + thing + " before " + month + " " + year + "?",
			org + " announcements " + year}
	default:
		bank := pick("the Fed", "the ECB", "the Bank of Japan", "the Bank of England")
		move := pick("cut rates", "hike rates", "hold rates")
		return titleTemplate{"Will " + bank + " " + move + " in " + month + "?", bank + " decision " + month + " " + year}
	}
}

// slugify lower-cases s and joins its words with '-', dropping anything
// else, like the venue's URL slugs.
func slugify(s string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(s) {
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(c)
		case c == ' ' || c == '-':
			dash = true
		}
	}
	return b.String()
}

// genMarkets builds n markets and their 2n tokens. Every third market
// (index 1, 4, 7, ...) is resolved, so any n >= 2 has both kinds whatever
// the seed.
func (s *Sim) genMarkets(n int) {
	r := newPRNG(s.seed, streamMarkets, 0)
	s.markets = make([]market, n)
	s.tokens = make([]token, 2*n)
	used := make(map[string]bool, n)
	id := r.between(100000, 499999)
	hist := s.endS - s.startS
	for i := range s.markets {
		m := &s.markets[i]
		id += r.between(1, 4999)
		m.id = strconv.FormatInt(id, 10)
		m.cond = r.hexID(32)
		txt := marketText(r, s.end)
		m.title = txt.title
		m.slug = slugify(txt.title)
		if used[m.slug] {
			m.slug += "-" + m.id
		}
		used[m.slug] = true
		m.eventSlug = slugify(txt.event)
		m.logo = "https://assets.legacysim.example/events/" + m.eventSlug + ".png"
		m.yes = r.between(50, 950) * tenthCnt
		m.feeBps = [4]int64{0, 0, 50, 100}[r.IntN(4)]
		m.resolved = i%3 == 1
		m.winner = r.IntN(2)
		if m.resolved {
			m.resolveTs = s.startS + hist*r.between(55, 90)/100
		}
		for o := range 2 {
			t := 2*i + o
			m.tokens[o] = t
			s.tokens[t] = token{market: i, outcome: o, id: r.digits(77)}
		}
	}
	for t := range s.tokens {
		s.tokens[t].frag = s.eventFragment(t)
	}
}

// appendPositionHead appends the market metadata block shared by position
// items (docs/CONTRACT.md#shape-position: marketId ... logo, in
// normalize/SHAPES.md order).
func (m *market) appendPositionHead(dst []byte) []byte {
	dst = append(dst, `{"marketId":`...)
	dst = appendStr(dst, m.id)
	dst = appendField(dst, "marketSlug", m.slug)
	dst = appendField(dst, "eventSlug", m.eventSlug)
	dst = appendField(dst, "conditionId", m.cond)
	dst = appendField(dst, "marketTitle", m.title)
	return appendField(dst, "logo", m.logo)
}
