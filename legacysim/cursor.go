package legacysim

import (
	"encoding/base64"
	"encoding/binary"
)

// cursorKind ties a cursor to the list it came from, so that a cursor of
// one endpoint passed to another is rejected instead of silently paging.
type cursorKind uint8

const (
	curOrderbook cursorKind = iota + 1
	curActivity
	curTransfers
	curCombos
	curClosed
	curOpen
)

// cursorPos is the position a cursor stands for: the sort key of the last
// item handed out. Keys are positions in the full (time-independent) data,
// not offsets, so a page boundary stays put when the clock reveals new
// items (docs/CONTRACT.md#pagination: a page named by a cursor does not
// shift when newer items arrive).
//
//	order book: ts = event time (ms), a = token index, b = event index
//	lists:      ts = item time (s), a = item sequence number, b = 0
type cursorPos struct {
	kind cursorKind
	ts   int64
	a, b uint32
}

// Layout: check(2) | kind(1) | ts(8) | a(4) | b(4) = 19 bytes, 28 base64
// characters ending in "==". The 17 payload bytes are XORed with a stream
// keyed by the check, so cursors look random and contain '+' and '/' often:
// cursors are opaque strings that must be passed back byte for byte
// (docs/CONTRACT.md#conventions), and the proxy's URL escaping must be
// exercised.
const (
	cursorRaw = 19
	cursorLen = 28 // base64.StdEncoding.EncodedLen(cursorRaw)
)

func cursorCheck(payload []byte) uint16 {
	h := uint64(0x6c65676163797369) // "legacysi"
	for _, b := range payload {
		h = mix64(h ^ uint64(b))
	}
	return uint16(h)
}

func scramble(payload []byte, check uint16) {
	k := mix64(uint64(check) | 0xc0de<<16)
	for i := range payload {
		if i%8 == 0 && i > 0 {
			k = mix64(k)
		}
		payload[i] ^= byte(k >> (8 * (i % 8)))
	}
}

// appendCursor appends the base64 form of c.
func appendCursor(dst []byte, c cursorPos) []byte {
	var raw [cursorRaw]byte
	p := raw[2:]
	p[0] = byte(c.kind)
	binary.BigEndian.PutUint64(p[1:], uint64(c.ts))
	binary.BigEndian.PutUint32(p[9:], c.a)
	binary.BigEndian.PutUint32(p[13:], c.b)
	chk := cursorCheck(p)
	binary.BigEndian.PutUint16(raw[:2], chk)
	scramble(p, chk)
	return base64.StdEncoding.AppendEncode(dst, raw[:])
}

// parseCursor decodes s, which must be a cursor of the wanted kind.
func parseCursor(s string, want cursorKind) (cursorPos, bool) {
	if len(s) != cursorLen {
		return cursorPos{}, false
	}
	var raw [cursorRaw + 2]byte
	n, err := base64.StdEncoding.Strict().Decode(raw[:], []byte(s))
	if err != nil || n != cursorRaw {
		return cursorPos{}, false
	}
	chk := binary.BigEndian.Uint16(raw[:2])
	p := raw[2:cursorRaw]
	scramble(p, chk)
	c := cursorPos{
		kind: cursorKind(p[0]),
		ts:   int64(binary.BigEndian.Uint64(p[1:])),
		a:    binary.BigEndian.Uint32(p[9:]),
		b:    binary.BigEndian.Uint32(p[13:]),
	}
	if cursorCheck(p) != chk || c.kind != want {
		return cursorPos{}, false
	}
	return c, true
}
