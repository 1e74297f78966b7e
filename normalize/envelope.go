package normalize

import (
	"errors"
	"fmt"
)

// envelope is what the top level of a body said.
type envelope struct {
	variant byte // 'A' (status_code) or 'B' (success); never both
	success bool
	code    []byte // B's code as a raw JSON string, nil if absent or null
	message []byte // raw JSON string, nil if absent or null
	hasData bool
}

// envelope reads the envelope of src (docs/CONTRACT.md "Response envelopes",
// SHAPES.md "Envelopes") with the scanner, which validates the whole body.
// Its keys may come in any order. When the key deciding success comes before
// data, as it does from the legacy host, data is written in stream;
// otherwise data is validated, and written once the envelope has been read.
// With rewrite false (Failure) data is only validated. A success envelope
// leaves the whole body in r.out.
func (r *rewriter) envelope(src []byte, rewrite bool) (envelope, error) {
	var env envelope
	s := &r.scan
	s.reset(src)
	i := s.ws(0)
	if i >= len(src) {
		return env, invalidf("empty body")
	}
	if src[i] != '{' {
		if end, err := s.value(i, 0); err != nil {
			return env, scanErr(err, end)
		}
		return env, invalidf("body is not an envelope object")
	}
	dataAt := -1 // data validated but not yet written
	done := false
	end, err := s.members(i, 1, func(name []byte, _, at int) (int, error) {
		switch string(name) {
		case "success":
			end, err := s.value(at, 1)
			if err != nil {
				return end, err
			}
			switch v := src[at:end]; {
			case string(v) != "true" && string(v) != "false":
				return at, invalidf("success is %s, not a boolean", v)
			case env.variant == 'A':
				return at, invalidf("envelope has both success and status_code")
			}
			env.variant, env.success = 'B', src[at] == 't'
			return end, nil
		case "status_code":
			v, end, err := r.scanString(at, "status_code", false)
			if err != nil {
				return end, err
			}
			if env.variant == 'B' {
				return at, invalidf("envelope has both success and status_code")
			}
			switch string(r.textOf(v)) {
			case "1":
				env.success = true
			case "0":
			default:
				return at, invalidf("status_code is %s, not \"1\" or \"0\"", v)
			}
			env.variant = 'A'
			return end, nil
		case "code":
			v, end, err := r.scanString(at, "code", true)
			env.code = v
			return end, err
		case "message":
			v, end, err := r.scanString(at, "message", true)
			env.message = v
			return end, err
		case "data":
			env.hasData = true
			if rewrite && env.success {
				r.out = append(r.out, SuccessPrefix...)
				done = true
				return r.dataAt(at, env.variant == 'A')
			}
			dataAt = at
			return s.value(at, 1)
		}
		return s.value(at, 1) // unknown envelope keys are dropped
	})
	if err != nil {
		return env, scanErr(err, end)
	}
	if end = s.ws(end); end != len(src) {
		return env, invalidf("data after the end of the body at offset %d", end)
	}
	switch {
	case env.variant == 0:
		return env, invalidf("not an envelope: neither success nor status_code")
	case !env.success:
		return env, nil
	case env.variant == 'B' && env.code != nil && string(r.textOf(env.code)) != "0":
		// Clients detect failure by code (docs/CONTRACT.md "Errors"): a success with
		// another code is contradictory, and must not be cached as data.
		return env, invalidf("success true with code %s", env.code)
	case !env.hasData:
		return env, invalidf("success envelope without data")
	}
	if rewrite && !done {
		r.out = append(r.out, SuccessPrefix...)
		if end, err := r.dataAt(dataAt, env.variant == 'A'); err != nil {
			return env, scanErr(err, end)
		}
	}
	r.out = append(r.out, '}')
	return env, nil
}

// scanString validates the value at src[at], which must be a JSON string
// (or null when nullable: v is then nil), and returns it raw.
func (r *rewriter) scanString(at int, what string, nullable bool) (v []byte, end int, err error) {
	s := &r.scan
	if end, err = s.value(at, 1); err != nil {
		return nil, end, err
	}
	switch s.src[at] {
	case '"':
		return s.src[at:end], end, nil
	case 'n':
		if nullable {
			return nil, end, nil
		}
	}
	return nil, at, invalidf("%s is %s, not a string", what, s.src[at:end])
}

// scanErr reports an error of the scanner as errInvalid at its offset;
// errors that already wrap errInvalid pass unchanged.
func scanErr(err error, offset int) error {
	if errors.Is(err, errInvalid) {
		return err
	}
	return fmt.Errorf("%w: %w at offset %d", errInvalid, err, offset)
}
