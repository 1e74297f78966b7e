package route

import (
	"unsafe"

	"tradergate/internal/poison"
)

// Own returns req as memory of its own that nothing writes again, for
// work that may outlive the memory req was validated into (a cache flight
// or a background refresh keeps the request it fetches): req itself when
// it is such already (one the memo remembered, Recall), else a copy. It is
// the one place a Request is copied for that.
func (req *Request) Own() *Request {
	if req.owned {
		return req
	}
	r := new(Request)
	ownCopy(r, req, "")
	return r
}

// ownCopy copies src into dst, its strings and extra into one block of
// their own, and returns extra's copy; dst is marked owned. Under the
// poison tag with the copies skipped (poison.SkipCopies), dst shares src's
// memory, as a copy left out would.
func ownCopy(dst, src *Request, extra string) string {
	if poison.Skipped() {
		*dst = *src
		dst.owned = true
		return extra
	}
	n := len(extra) + len(src.PathParam) + len(src.Key)
	for _, v := range src.query.vals {
		n += len(v)
	}
	buf := make([]byte, 0, n)
	// own appends s to buf and returns the copy. buf never grows past
	// its capacity, so the bytes under every copy stay where they are.
	own := func(s string) string {
		if s == "" {
			return ""
		}
		start := len(buf)
		buf = append(buf, s...)
		return unsafe.String(&buf[start], len(s))
	}
	extra = own(extra)
	*dst = *src
	dst.keyBuf = [len(dst.keyBuf)]byte{}
	dst.PathParam = own(src.PathParam)
	for i, v := range src.query.vals {
		dst.query.vals[i] = own(v)
	}
	dst.Key = own(src.Key)
	dst.RawQuery = dst.Key[len(dst.Key)-len(src.RawQuery):]
	dst.owned = true
	return extra
}

// Poison overwrites the memory req's strings may point into, when built
// with the poison tag: for an owner that reuses req and poisons its own
// memory (the edge's pooled exchanges).
func (req *Request) Poison() {
	poison.Fill(req.keyBuf[:])
}
