// Package normalize rewrites the response bodies of the legacy host
// (variant B of docs/CONTRACT.md) into the variant A contract that tradergate serves.
// It is pure: bytes in, bytes out, no I/O. SHAPES.md beside this file fixes
// the variant B shapes assumed for each endpoint.
//
// # How
//
// Nothing is decoded into maps or interfaces and no value passes through a
// float, so every digit and the order of every member survive. One
// validating scanner (scan.go) reads the whole body once, as jsontext
// validates by default (RFC 7493): invalid or truncated JSON, invalid UTF-8,
// duplicate member names and nesting deeper than 10000 make a body invalid
// (an invalid-body error), so the output is always valid JSON that any strict client
// accepts. FuzzScanner holds the scanner to jsontext's verdict.
//
//   - Data that passes through unchanged (order book data, variant A data)
//     is validated while Meta is gathered, then copied byte for byte.
//   - Data that is rewritten is written member by member into the caller's
//     buffer as the scanner reads it: compact, member order kept, renames
//     in place (values.go). Members that come out as they went in, side by
//     side in a compact body, are copied as one span.
//
// The scanner is the package's own rather than jsontext's decoder because
// the decoder scans strings a byte at a time and checks duplicate names by
// comparing each name with every earlier one; the scanner reads strings
// eight bytes at a time and settles most names with a 64-bit filter.
// BenchmarkRewrite and BenchmarkRewriteLegacySim measure it.
//
// # Envelopes (docs/CONTRACT.md "Response envelopes")
//
//   - A variant B success becomes {"message":"OK","status_code":"1","data":…},
//     compact, keys in that order. The keys of the input may come in any
//     order; unknown envelope keys are dropped.
//   - success true with a code other than "0" is refused as invalid: clients detect
//     failure by code (docs/CONTRACT.md "Errors"), so the body is contradictory and
//     must not be served or cached as data.
//   - A body already in variant A (status_code, no success) with status_code
//     "1" keeps its data byte for byte; its envelope is written in the
//     canonical form above, which is the same bytes for a canonical body.
//     An envelope with both success and status_code is refused as invalid.
//   - success false, or status_code "0", is a *FailureError carrying code and
//     message; Failure reads the same without rewriting.
//
// # Decimals and prices (docs/CONTRACT.md "Conventions"; docs/ARCHITECTURE.md)
//
// A decimal field that arrives as a JSON number leaves as a string. A
// number in plain notation keeps its characters ("fee": 0.5 -> "fee":
// "0.5", 12.50 stays "12.50"). A number in exponent form is converted
// exactly to plain notation, as ShiftCents does with no shift ("fee": 1e-7
// -> "fee": "0.0000001", 2.5E+3 -> "2500"): variant A decimals are plain
// decimal strings (docs/CONTRACT.md "Conventions"), and a client reading them as such
// would fail on, or misread, "1e-7". Its exponent is capped as a price's is
// (below). Strings and null are copied. With Options.ShiftCents a price
// field is divided by 100 by moving the decimal point on its digits (see
// ShiftCents): exact, whatever its length. Without it (price_scale: unit),
// prices keep their digits and are only checked to be decimals, except that
// one in exponent form is written in plain notation, as decimals are.
//
// Decisions on what counts as a price:
//   - The accepted form is -?digits(.digits)?([eE][+-]?digits)?. Leading
//     zeros are accepted ("007" -> "0.07"): unlike a JSON number, an upstream
//     string is not bound by that rule and its value is unambiguous.
//   - Exponent form is converted exactly, not passed through: "1e2" is 100
//     cents and becomes "1"; "1.5E-3" becomes "0.000015". Clients expect
//     plain decimals on a 0 to 1 scale, and shifting the point of a mantissa
//     while keeping its exponent would be a second notation for one value.
//     An exponent beyond ±1000 is refused as invalid, so a few bytes of input cannot
//     ask for gigabytes of zeros.
//   - "", "+5", ".5", "5.", "1e", "0x10", " 5", "NaN" are refused as invalid. An empty
//     string in particular is not read as "no price": the contract has null
//     for that (and null stays null), and a client parsing decimals would
//     fail on "". A malformed price makes the whole page unservable (502)
//     rather than cached with a wrong value.
//
// # Shapes (SHAPES.md "Per endpoint")
//
// Field renames happen in place. Should an object carry both a variant B name
// and the variant A name it is renamed to, the first in the input is kept and
// the other dropped: the output never repeats a name. A list whose data is
// null (docs/CONTRACT.md "Response envelopes" rule 1, nothing found) keeps data null and reports
// Meta.DataNull; a list object without items is refused as invalid. Transaction
// detail: only sourceType "COMBO" selects the combo layout; any other source
// type is rewritten as a TRADE.
package normalize
