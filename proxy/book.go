package proxy

import (
	"cmp"
	"context"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"

	"tradergate/normalize"
	"tradergate/proxy/orderbook"
	"tradergate/proxy/route"
)

// serveBook answers the order book at a time T (docs/CONTRACT.md
// #orderbook-book): orderbook.Rebuild follows the contract's reconstruction
// rule over pages of the events route, and each page is an ordinary page
// of the cache, fetched and coalesced like any request's. A settled T is
// read from pages bounded at T rounded up to orderbook.align, settled
// themselves, so that rebuilds near the same T read the same cached pages
// and cost no legacy call; a recent T reads pages bounded at T.
//
// The rebuild is charged the events pages it read, as a client paging the
// events route would be: the rate limit step took the first, and the rest
// are taken once the pages are read, before the answer. A charge past the
// allowance is answered 429 like any request past it.
func (s *Server) serveBook(x *exchange) {
	at, ok := x.req.IntParam("at")
	if !ok {
		at = x.now.UnixMilli()
	}
	depth, _ := x.req.IntParam("depth")
	pages := 0
	book, err := orderbook.Rebuild(x.ctx, s.eventsPages(x, &pages), x.req.Param("tokenId"), at, orderbook.Options{
		Depth:     int(depth),
		MaxEvents: s.cfg.OrderBook.MaxEvents,
		Align:     s.cfg.OrderBook.Align,
		Settled:   s.eventsSettled(x),
	})
	if pages > 1 && !s.allowed(x, s.take(x, int64(pages-1))) {
		return
	}
	if err != nil {
		x.fail(bookError(err))
		return
	}
	body := append(make([]byte, 0, 1024), normalize.SuccessPrefix...)
	body = append(book.AppendJSON(body), '}')
	// Built for this request from pages the cache holds: nothing to cache
	// downstream, and no cache headers of its own.
	x.SetHeader("Cache-Control", "no-store")
	x.Reply(http.StatusOK, body)
}

// eventsSettled is the first Unix ms that the cache policy of the events
// route does not hold settled at the request's time: a page bounded before
// it is immutable (docs/ARCHITECTURE.md "Cache policy"). Without a settle
// window (a configuration whose defaults were not applied) nothing is
// settled, and every page is bounded at T.
func (s *Server) eventsSettled(x *exchange) int64 {
	c := s.live.Load().Cache
	w := cmp.Or(c.Routes[route.OrderBookEvents].SettleWindow, c.Policy.SettleWindow)
	if w <= 0 {
		return math.MinInt64
	}
	return x.now.Add(-w).UnixMilli()
}

// eventsPages reads events pages for a rebuild through the cache, counting
// them in *pages. A query the events route refuses would be a bug of the
// rebuild, not the client's doing, so it is an internal error rather than
// a 400.
func (s *Server) eventsPages(x *exchange, pages *int) orderbook.PageFunc {
	events := s.routes.ByName(route.OrderBookEvents)
	return func(ctx context.Context, q orderbook.Query) ([]byte, error) {
		*pages++
		raw := "tokenId=" + url.QueryEscape(q.TokenID) + "&eventType=" + q.EventType +
			"&to=" + strconv.FormatInt(q.To, 10) + "&order=" + q.Order + "&limit=" + strconv.Itoa(q.Limit)
		if q.Cursor != "" {
			raw += "&cursor=" + url.QueryEscape(q.Cursor)
		}
		req := new(route.Request)
		if err := events.ValidateInto(req, "", raw); err != nil {
			return nil, errors.New("order book page query refused: " + err.Error())
		}
		r, err := s.cache.Get(ctx, req.Key, s.fetch(x.handOn(), x.keyID(), req))
		if err != nil {
			return nil, err
		}
		if b := r.Entry.Body(); b != nil {
			return b, nil
		}
		return nil, errors.New("cache: an events page's identity form could not be made")
	}
}

// bookError maps what a rebuild can fail with to the error table.
func bookError(err error) error {
	var many *orderbook.TooManyEventsError
	switch {
	case errors.Is(err, orderbook.ErrNoSnapshot):
		return &edgeError{kind: failNoSnapshot, Err: err}
	case errors.As(err, &many):
		return &edgeError{kind: failTooManyEvents, Err: err,
			message: "More than " + strconv.Itoa(many.Max) + " price changes between the last snapshot and at: pick an at nearer a snapshot"}
	case errors.Is(err, orderbook.ErrBadPage):
		return &edgeError{kind: failUpstreamInvalid, Err: err}
	}
	return err
}
