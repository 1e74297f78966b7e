package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"tradergate/proxy/route"
)

// Bounds are one route's cache figures (cache.Policy, after defaults).
type Bounds struct {
	Fresh, Negative, Immutable time.Duration // TTLs
	SWR, SIE                   time.Duration // stale-while-revalidate, stale-if-error
}

// Epoch is the cache policy in force from From on, by route name: a
// configuration reload starts a new one.
type Epoch struct {
	From   time.Time
	Routes map[string]Bounds
}

// Book is the truth of an order book at T (orderbook_book): the variant A
// body the edge must answer for tokenID at at with depth levels.
type Book func(tokenID string, at int64, depth int) (string, error)

// Logs returns what the edge logged that bears on an exchange: its lines
// naming the request id, and its warnings and errors around [from, to].
type Logs func(replica int, requestID string, from, to time.Time) []string

// Checker holds a run's history to the edge's promise (doc.go).
type Checker struct {
	Routes *route.Table
	Truth  *Truth
	Book   Book
	Epochs []Epoch // by From, the first from before the run
	Faults []Fault
	Tails  Tails
	// SlowFetches: the machine is too slow to tell a failing fetch from
	// its own slowness. The edge serves a held page, up to stale_if_error
	// old, for a key whose fetch has run cache.stale_after without
	// answering, whatever slowed it; with SlowFetches that bound holds at
	// every moment, not only while a fault is in force.
	SlowFetches bool
	Logs        Logs // nil: none printed
	// Fetch is the longest a legacy fetch may run (upstream.timeout for
	// each of its attempts): what a MISS's Age may hold beyond its TTL.
	Fetch time.Duration
	// Slack is how much older than its Age an answer's legacy version may
	// be: the time between the legacy host making the answer and the edge
	// storing it (the transfer, the rewrite, a loaded machine).
	Slack time.Duration
	// Phases names the run's phases, for the report.
	Phases []string
	// Streams is the truth of the run's streams (CheckStreams), and
	// StreamSlack what a stream's freshness bound allows beyond its
	// route's poll and TTLs (streamBound).
	Streams     StreamTruth
	StreamSlack time.Duration
	// StreamTail is how long after a fault's own tail a stream's events
	// may still be late: the poller's lease (streams.lease), which a
	// replica that stopped or lost Redis may hold that long after.
	StreamTail time.Duration

	detailed int // violations given their detail so far
}

// Violation is one answer that breaks the promise.
type Violation struct {
	Rule string // what was broken, in a few words
	Why  string // the particulars
	Ex   Exchange
	// Truth is the nearest truth: the legacy host's version of the same
	// upstream request nearest in time, and how it differs.
	Truth string
	Logs  []string
}

// String prints the request, the answer, the nearest truth and what the
// edge logged then.
func (v *Violation) String() string {
	var b strings.Builder
	e := &v.Ex
	fmt.Fprintf(&b, "VIOLATION %s: %s\n", v.Rule, v.Why)
	if e.Method == "" { // a rule over the whole run, not one answer
		return b.String()
	}
	fmt.Fprintf(&b, "  request:  %s %s  replica %d %s gzip=%v If-None-Match=%q id=%s\n", e.Method, e.Target, e.Replica, e.Front, e.Gzip, e.IfNoneMatch, e.ID)
	fmt.Fprintf(&b, "            sent %s, answered after %v\n", e.Sent.Format("15:04:05.000"), e.Received.Sub(e.Sent).Round(time.Millisecond))
	fmt.Fprintf(&b, "  answer:   %d err=%q Age=%q X-Cache=%q Cache-Status=%q ETag=%q Cache-Control=%q Content-Encoding=%q\n",
		e.Status, e.Err, e.Age, e.XCache, e.CacheStatus, e.ETag, e.CacheControl, e.ContentEncoding)
	fmt.Fprintf(&b, "            body (%d bytes, xxh %016x): %s\n", len(e.Body), xxhash.Sum64String(e.Body), excerpt(e.Body, 0, 160))
	if v.Truth != "" {
		fmt.Fprintf(&b, "  truth:    %s\n", v.Truth)
	}
	for _, l := range v.Logs {
		fmt.Fprintf(&b, "  edge log: %s\n", l)
	}
	return b.String()
}

// PhaseCount is what one phase of the run was answered.
type PhaseCount struct {
	Name       string
	Answers    int
	Statuses   map[int]int    // 0: no answer
	Failures   map[string]int // "503 Upstream busy": the failures answered, by status and message
	XCache     map[string]int
	Violations int
}

// Result is the verdict on a history.
type Result struct {
	Checked    int // answers checked
	Phases     []PhaseCount
	Violations []Violation
	// Immutable is how many upstream requests the edge called immutable,
	// each held to one body for the whole run.
	Immutable int
	// Streams is the verdict on the run's streams (CheckStreams); its
	// violations are among Violations too. nil: the run had none.
	Streams *StreamResult
}

// Check holds every exchange to the promise and returns the verdict.
func (c *Checker) Check(exs []Exchange) *Result {
	res := &Result{}
	newPhase := func(name string) PhaseCount {
		return PhaseCount{Name: name, Statuses: map[int]int{}, Failures: map[string]int{}, XCache: map[string]int{}}
	}
	for _, name := range c.Phases {
		res.Phases = append(res.Phases, newPhase(name))
	}
	phase := func(p int) *PhaseCount {
		for len(res.Phases) <= p {
			res.Phases = append(res.Phases, newPhase("phase "+strconv.Itoa(len(res.Phases))))
		}
		return &res.Phases[p]
	}
	books := map[string]bookTruth{}
	immutable := map[string]bool{}        // upstream targets the edge called immutable
	bodies := map[string]map[uint64]int{} // upstream target -> hashes of the 200 bodies served
	for i := range exs {
		e := &exs[i]
		pc := phase(e.Phase)
		pc.Answers++
		pc.Statuses[e.Status]++
		if e.XCache != "" {
			pc.XCache[e.XCache]++
		}
		if e.Status >= 400 {
			if msg, ok := failureMessage(e.Body); ok {
				pc.Failures[strconv.Itoa(e.Status)+" "+msg]++
			}
		}
		res.Checked++
		if v := c.check(e, books, immutable, bodies); v != nil {
			pc.Violations++
			res.Violations = append(res.Violations, *v)
		}
	}
	// Immutable pages never change: one body for the whole run, in every
	// answer of the edge and in every answer of the legacy host.
	targets := make([]string, 0, len(immutable))
	for tg := range immutable {
		targets = append(targets, tg)
	}
	slices.Sort(targets)
	res.Immutable = len(targets)
	for _, tg := range targets {
		seen := map[uint64]bool{}
		for h := range bodies[tg] {
			seen[h] = true
		}
		for _, v := range c.Truth.Versions(tg) {
			seen[v.Hash] = true
		}
		if len(seen) > 1 {
			var hs []string
			for h := range seen {
				hs = append(hs, fmt.Sprintf("%016x", h))
			}
			slices.Sort(hs)
			res.Violations = append(res.Violations, Violation{
				Rule: "immutable page changed",
				Why:  fmt.Sprintf("%s was answered immutable, and its bodies over the run were %d: %s", tg, len(seen), strings.Join(hs, ", ")),
				Ex:   Exchange{Target: tg},
			})
		}
	}
	return res
}

// bookTruth is a memo of Book.
type bookTruth struct {
	body string
	err  error
}

// check returns the violation of one exchange, or nil.
func (c *Checker) check(e *Exchange, books map[string]bookTruth, immutable map[string]bool, bodies map[string]map[uint64]int) *Violation {
	path, rawQuery, _ := strings.Cut(e.Target, "?")
	rt, param := c.Routes.Match(path)
	if rt == nil {
		return c.violation(e, "", "request off the contract", "the harness sent a path no route has")
	}
	req, err := rt.Validate(param, rawQuery)
	if err != nil {
		return c.violation(e, "", "request off the contract", "the harness sent an invalid request: "+err.Error())
	}
	up := ""
	if !rt.EdgeBuilt {
		up = upstreamTarget(route.LegacyPrefix+req.UpstreamPath(), req.RawQuery)
	}
	faults := active(c.Faults, c.Tails, e.Replica, e.Sent, e.Received)

	// No answer, or one broken off: only a replica going away explains it.
	if e.Status == 0 || e.Err != "" {
		for _, f := range faults {
			if rules[f.Kind].noAnswer {
				return nil
			}
		}
		return c.violation(e, up, "no whole answer", "no fault in force lets a request go unanswered: "+e.Err)
	}
	if ct := e.ContentType; ct != "application/json" && e.Status != 304 {
		return c.violation(e, up, "not JSON", "Content-Type "+strconv.Quote(ct))
	}
	if e.ContentEncoding != "" && (e.ContentEncoding != "gzip" || !e.Gzip) {
		return c.violation(e, up, "wrong encoding", "Content-Encoding "+strconv.Quote(e.ContentEncoding)+" for a client that sent gzip="+strconv.FormatBool(e.Gzip))
	}

	switch {
	case e.Status == 200 && rt.EdgeBuilt:
		return c.checkBook(e, up, req, books)
	case e.Status == 200 || e.Status == 304:
		return c.checkPage(e, up, rt.Name, req, faults, immutable, bodies)
	}

	// Any other status: one the faults in force allow, in the envelope.
	if e.Method != "HEAD" {
		msg, ok := failureMessage(e.Body)
		if !ok {
			return c.violation(e, up, "failure outside the envelope", "not a variant A failure body")
		}
		if e.CacheControl != "no-store" {
			return c.violation(e, up, "failure cached", "Cache-Control "+strconv.Quote(e.CacheControl))
		}
		for _, f := range faults {
			if slices.Contains(rules[f.Kind].outcomes, Outcome{e.Status, msg}) {
				return nil
			}
		}
		return c.violation(e, up, "failure no fault allows", fmt.Sprintf("%d %q with faults in force: %s", e.Status, msg, kinds(faults)))
	}
	for _, f := range faults {
		for _, o := range rules[f.Kind].outcomes {
			if o.Status == e.Status {
				return nil
			}
		}
	}
	return c.violation(e, up, "failure no fault allows", fmt.Sprintf("HEAD %d with faults in force: %s", e.Status, kinds(faults)))
}

// checkPage holds a 200 or 304 of a legacy route to the truth: its body
// (or the body its ETag names) is a version the legacy host gave for the
// same upstream request, as recent as its Age says, and its Age within
// the route's bound.
func (c *Checker) checkPage(e *Exchange, up, routeName string, req *route.Request, faults []Fault, immutable map[string]bool, bodies map[string]map[uint64]int) *Violation {
	age, err := strconv.ParseInt(e.Age, 10, 64)
	if err != nil || age < 0 {
		return c.violation(e, up, "no Age", "Age "+strconv.Quote(e.Age))
	}
	switch e.XCache {
	case "HIT", "MISS", "STALE", "BYPASS":
	default:
		return c.violation(e, up, "no X-Cache", "X-Cache "+strconv.Quote(e.XCache))
	}
	tagHash, tagGz, ok := etagHash(e.ETag)
	if !ok {
		return c.violation(e, up, "bad ETag", "ETag "+strconv.Quote(e.ETag))
	}
	if tagGz != (e.ContentEncoding == "gzip") && e.Status == 200 && e.Method == "GET" {
		return c.violation(e, up, "ETag of another representation", "ETag "+e.ETag+" with Content-Encoding "+strconv.Quote(e.ContentEncoding))
	}
	hash := tagHash
	switch {
	case e.Status == 304:
		if e.IfNoneMatch == "" || !namesHash(e.IfNoneMatch, tagHash) {
			return c.violation(e, up, "304 without a matching If-None-Match", "If-None-Match "+strconv.Quote(e.IfNoneMatch)+", ETag "+e.ETag)
		}
		if e.Body != "" {
			return c.violation(e, up, "304 with a body", "")
		}
	case e.Method == "HEAD":
		if e.Body != "" {
			return c.violation(e, up, "HEAD with a body", "")
		}
	default:
		hash = xxhash.Sum64String(e.Body)
		if tagHash != hash {
			return c.violation(e, up, "ETag does not name the body", fmt.Sprintf("ETag %s, body's hash %016x", e.ETag, hash))
		}
	}

	// The body is the rewrite of an answer the legacy host gave for this
	// upstream request, made no earlier than Age says (Age is whole
	// seconds since the edge stored it).
	versions := c.Truth.Versions(up)
	earliest := e.Sent.Add(-time.Duration(age+1)*time.Second - c.Slack)
	found, inTime := false, false
	var match Version
	for _, v := range versions {
		if v.Hash != hash {
			continue
		}
		found, match = true, v
		if !v.At.Before(earliest) && !v.At.After(e.Received) {
			inTime = true
			break
		}
	}
	switch {
	case !found:
		return c.violation(e, up, "not an answer of the legacy host", "no answer the legacy host gave to "+up+" rewrites to this body")
	case !inTime:
		return c.violation(e, up, "older than its Age", fmt.Sprintf("Age %d, but the legacy host gave this body only before %s", age, earliest.Format("15:04:05.000")))
	case e.Method == "HEAD" && e.Status == 200 && !tagGz && e.ContentLength != strconv.Itoa(len(match.Body)):
		return c.violation(e, up, "HEAD's length is not the body's", "Content-Length "+strconv.Quote(e.ContentLength)+", body "+strconv.Itoa(len(match.Body)))
	}

	// The age is within the route's bound: its TTL, plus
	// stale-while-revalidate for a STALE answer, plus stale-if-error while
	// a fault makes fetches fail or wait.
	imm := strings.Contains(e.CacheControl, "immutable")
	b := c.bounds(routeName, e.Received)
	limit := b.Fresh
	switch {
	case imm:
		limit = b.Immutable
	case match.DataNull:
		limit = b.Negative
	}
	if e.XCache == "STALE" {
		failing := c.SlowFetches
		for _, f := range faults {
			failing = failing || rules[f.Kind].staleIfError
		}
		if failing {
			limit += b.SIE
		} else {
			limit += b.SWR
		}
	}
	if e.XCache == "MISS" {
		// A fetched page's age counts from the fetch's start (cache/miss.go,
		// newEntry, as RFC 9111 4.2.3 counts from the request time): a
		// MISS that joined a slow fetch is as old as the fetch took.
		limit += c.Fetch
	}
	if time.Duration(age)*time.Second > limit {
		return c.violation(e, up, "stale beyond its bound", fmt.Sprintf("Age %ds, X-Cache %s, bound %v with faults in force: %s", age, e.XCache, limit, kinds(faults)))
	}
	if imm {
		immutable[up] = true
	}
	if e.Status == 200 && e.Method == "GET" {
		if bodies[up] == nil {
			bodies[up] = map[uint64]int{}
		}
		bodies[up][hash]++
	}
	return nil
}

// checkBook holds an order book at T to its truth, the edge's own rebuild
// over the legacy host's pages.
func (c *Checker) checkBook(e *Exchange, up string, req *route.Request, books map[string]bookTruth) *Violation {
	if e.Method == "HEAD" {
		return nil
	}
	at, ok := req.IntParam("at")
	if !ok || at > e.Sent.UnixMilli()-int64(10*time.Minute/time.Millisecond) {
		// The book at a recent T is as of the events pages the cache
		// holds: the harness asks only for settled ones.
		return c.violation(e, up, "request off the harness", "orderbook_book without a settled at")
	}
	depth, _ := req.IntParam("depth")
	k := req.Key
	bt, ok := books[k]
	if !ok {
		bt.body, bt.err = c.Book(req.Param("tokenId"), at, int(depth))
		books[k] = bt
	}
	if bt.err != nil {
		return c.violation(e, up, "no truth", bt.err.Error())
	}
	if e.Body != bt.body {
		v := c.violation(e, up, "order book differs", "the rebuild of the legacy host's events differs")
		v.Truth = diff(e.Body, bt.body)
		return v
	}
	return nil
}

// bounds returns the largest figures of a route over the epochs that can
// have stored a page served at t (those from before t back to one whose
// TTLs have all run out).
func (c *Checker) bounds(routeName string, t time.Time) Bounds {
	var b Bounds
	for i, ep := range c.Epochs {
		if ep.From.After(t) {
			break
		}
		r := ep.Routes[routeName]
		// An epoch ended long before t stored nothing still servable but
		// immutable pages, whose bound is a day anyway.
		if i+1 < len(c.Epochs) && c.Epochs[i+1].From.Add(r.Fresh+r.Negative+r.SIE).Before(t) {
			b.Immutable = max(b.Immutable, r.Immutable)
			continue
		}
		b.Fresh, b.Negative, b.Immutable = max(b.Fresh, r.Fresh), max(b.Negative, r.Negative), max(b.Immutable, r.Immutable)
		b.SWR, b.SIE = max(b.SWR, r.SWR), max(b.SIE, r.SIE)
	}
	return b
}

// violation builds a violation with the nearest truth and the edge's log
// lines.
func (c *Checker) violation(e *Exchange, up, rule, why string) *Violation {
	v := &Violation{Rule: rule, Why: why, Ex: *e}
	// The first few carry the detail; past them a broken run is broken
	// enough, and reading the logs again for each would take long.
	c.detailed++
	if c.detailed > detailedViolations {
		return v
	}
	if up != "" {
		v.Truth = c.nearest(e, up)
	}
	if c.Logs != nil {
		v.Logs = c.Logs(e.Replica, e.ID, e.Sent, e.Received)
	}
	return v
}

// detailedViolations is how many violations get the nearest truth and the
// edge's log lines.
const detailedViolations = 20

// nearest describes the truth of up nearest in time to e's answer, and
// how e's body differs from it.
func (c *Checker) nearest(e *Exchange, up string) string {
	vs := c.Truth.Versions(up)
	if len(vs) == 0 {
		return "the legacy host never answered 200 to " + up
	}
	best := vs[0]
	for _, v := range vs {
		if v.At.Sub(e.Received).Abs() < best.At.Sub(e.Received).Abs() {
			best = v
		}
	}
	s := fmt.Sprintf("%d versions of %s; nearest made %v before the answer (xxh %016x, edge request %s)",
		len(vs), up, e.Received.Sub(best.At).Round(time.Millisecond), best.Hash, best.RequestID)
	if e.Body != "" && e.Body != best.Body {
		s += "\n            " + diff(e.Body, best.Body)
	}
	return s
}

// diff shows where got first differs from want.
func diff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("first difference at byte %d of %d (truth %d bytes): answer %s, truth %s",
		i, len(got), len(want), excerpt(got, i, 80), excerpt(want, i, 80))
}

func excerpt(s string, at, n int) string {
	from := max(0, at-20)
	to := min(len(s), from+n)
	out := strconv.Quote(s[from:to])
	if from > 0 {
		out = "…" + out
	}
	if to < len(s) {
		out += "…"
	}
	return out
}

// failureMessage reads a variant A failure body, exactly as the edge
// writes it (docs/CONTRACT.md#envelopes), and returns its message.
func failureMessage(body string) (string, bool) {
	var f struct {
		Message    string          `json:"message"`
		StatusCode string          `json:"status_code"`
		Data       json.RawMessage `json:"data"`
	}
	if json.Unmarshal([]byte(body), &f) != nil {
		return "", false
	}
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(f.Message)
	exact := `{"message":` + strings.TrimSuffix(want.String(), "\n") + `,"status_code":"0","data":null}`
	return f.Message, body == exact
}

// namesHash reports whether If-None-Match names the page whose identity
// body has hash, in either representation, by the weak comparison of RFC
// 9110 13.1.2 ("*" names any page, W/ is ignored).
func namesHash(inm string, hash uint64) bool {
	for part := range strings.SplitSeq(inm, ",") {
		p := strings.TrimPrefix(strings.TrimSpace(part), "W/")
		if h, _, ok := etagHash(p); p == "*" || ok && h == hash {
			return true
		}
	}
	return false
}

func kinds(fs []Fault) string {
	if len(fs) == 0 {
		return "none"
	}
	var out []string
	for _, f := range fs {
		k := string(f.Kind)
		if f.Replica >= 0 {
			k += " (replica " + strconv.Itoa(f.Replica) + ")"
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return strings.Join(out, ", ")
}

// Report is the verdict in a few lines: answers and violations by phase.
func (r *Result) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d answers checked, %d violations, %d immutable pages held to one body", r.Checked, len(r.Violations), r.Immutable)
	if r.Streams != nil {
		fmt.Fprintf(&b, ", %d stream events checked over %d subscribers", r.Streams.Events, r.Streams.Subscriptions)
	}
	b.WriteString("\n")
	rules := map[string]int{}
	for _, v := range r.Violations {
		rules[v.Rule]++
	}
	for rule, n := range rules {
		fmt.Fprintf(&b, "  violations %q: %d\n", rule, n)
	}
	if r.Streams != nil {
		b.WriteString(r.Streams.Report())
	}
	for i, p := range r.Phases {
		var st []string
		codes := make([]int, 0, len(p.Statuses))
		for s := range p.Statuses {
			codes = append(codes, s)
		}
		slices.Sort(codes)
		for _, s := range codes {
			name := strconv.Itoa(s)
			if s == 0 {
				name = "none"
			}
			st = append(st, fmt.Sprintf("%s:%d", name, p.Statuses[s]))
		}
		events := ""
		if r.Streams != nil {
			events = fmt.Sprintf(", %d stream events", r.Streams.ByPhase[i])
		}
		fmt.Fprintf(&b, "  %-48s %7d answers, %d violations  [%s] stale %d%s\n", p.Name, p.Answers, p.Violations, strings.Join(st, " "), p.XCache["STALE"], events)
		var fs []string
		for f, n := range p.Failures {
			fs = append(fs, fmt.Sprintf("%s: %d", f, n))
		}
		slices.Sort(fs)
		if len(fs) > 0 {
			fmt.Fprintf(&b, "  %48s %s\n", "", strings.Join(fs, ", "))
		}
	}
	return b.String()
}
