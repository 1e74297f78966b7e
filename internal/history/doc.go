// Package history checks the edge's promise over a whole recorded run:
// what a set of clients asked three replicas, and every answer they got,
// held against what the legacy host really said. It is test support
// (internal/); its own tests run the fleet under faults and check it.
//
// # The promise
//
//   - Every 200 of a legacy route is the variant A rewrite of an answer
//     the legacy host gave for the same canonical request, made no
//     earlier than the answer's Age says (Age+1 seconds, Age being whole
//     seconds, plus Checker.Slack for the transfer), and that Age is
//     within the route's bound: its TTL (fresh, negative for a lookup
//     that found nothing, a day for a settled page), plus
//     stale-while-revalidate for a STALE answer, plus stale-if-error only
//     while a fault makes fetches fail or wait (docs/CONTRACT.md
//     #cache-headers and #errors), plus the longest fetch for a MISS
//     (whose age counts from its fetch's start). Its ETag names its body (an xxHash of
//     the identity body, cache/entry.go), and its encoding is one the
//     client accepted.
//   - A page the edge answered immutable never changes: one body for the
//     whole run, in every answer of the edge and of the legacy host.
//   - A 304 answers an If-None-Match that names the page held to the rule
//     above; a HEAD's ETag and length are those of such a page.
//   - The order book at T (orderbook_book) is the edge's own rebuild
//     (proxy/orderbook) over the legacy host's events pages.
//   - Every other status is one the fault in force allows (faults.go:
//     each fault, the statuses and messages it explains, and how long
//     after it ends it may still be seen), in the variant A failure
//     envelope with Cache-Control: no-store; and no answer at all only
//     while the replica asked is going down.
//   - A subscriber of an event stream (docs/CONTRACT.md#streams) that
//     reconnects with Last-Event-ID whenever its stream ends gets every
//     item of the legacy host from its start to its last event once, in
//     the stream's order, each event's data the item's variant A
//     rewrite exactly, its id the one the contract gives; and, while no
//     fault is in force, each within a poll interval, the route's fresh
//     TTL and stale-while-revalidate, and Checker.StreamSlack of the
//     item becoming visible (stream.go). What became visible that long
//     before the subscriber left must have come.
//
// # The truth
//
// The legacy host is legacysim in live mode (its data grows as time
// passes, every past page stays as it was) with its journal on: a record
// of every answer it made, with the instant it made it. NewTruth rewrites
// each 200 of the journal with the edge's rewrite (normalize.Rewrite, as
// proxy/upstream calls it), so the truth is derived, never assumed. A
// violation prints the request, the answer, the nearest truth (the
// version of the same upstream request nearest in time, and where the
// bodies first differ) and what the edge logged then (its access line for
// the request id, and its warnings around it). A stream's truth is the
// pages of the route it streams, asked after the run of a twin of the
// legacy host (the same data, a pure function of the clock, so asked
// later it holds every item the run could have streamed), rewritten the
// same way, each item given the id and event name of
// docs/CONTRACT.md#streams.
//
// # Not covered
//
// Only the routes of docs/CONTRACT.md#routes and their streams are
// recorded; the admin listener and the legacy paths (/open-api/v1/...)
// are not. A stream's freshness is not held while a fault is in force
// (its events may wait for the legacy host, or a lease to pass), and the
// error events other than shutting_down are counted, not held to a rule.
package history
