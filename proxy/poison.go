package proxy

import "tradergate/internal/poison"

// poison overwrites what strings may point into once x is cleared for
// the pool (built with the poison tag only): its buffers, the canonical
// request's key, and grown, the value buffer it had grown into, which
// strings handed out by own may still point into.
func (x *exchange) poison(grown []byte) {
	poison.Fill(x.idBuf[:])
	x.Request.Poison()
	x.Answer.Poison(grown)
	x.reqBuf.Poison()
}
