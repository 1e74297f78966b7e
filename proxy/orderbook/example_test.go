package orderbook_test

import (
	"context"
	"fmt"

	"tradergate/proxy/orderbook"
)

func ExampleRebuild() {
	// Two pages as the events endpoint would answer them: the latest
	// snapshot at or before T, then the price changes after its cursor.
	pages := func(_ context.Context, q orderbook.Query) ([]byte, error) {
		if q.EventType == "book" {
			return []byte(`{"message":"OK","status_code":"1","data":{"items":[{"cursor":"c1","tokenId":"42",
				"eventType":"book","timestamp":1700000000000,"bids":[["0.78","100"],["0.77","5"]],"asks":[["0.80","40"]]}],
				"nextCursor":null}}`), nil
		}
		return []byte(`{"message":"OK","status_code":"1","data":{"items":[
			{"cursor":"c2","tokenId":"42","eventType":"price_change","timestamp":1700000001000,"side":"BUY","price":"0.770","sizeAfter":"0"},
			{"cursor":"c3","tokenId":"42","eventType":"price_change","timestamp":1700000002000,"side":"SELL","price":"0.81","sizeAfter":"12.50"}],
			"nextCursor":null}}`), nil
	}
	book, err := orderbook.Rebuild(context.Background(), pages, "42", 1700000005000, orderbook.Options{Depth: 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(book.AppendJSON(nil)))
	// Output:
	// {"tokenId":"42","at":1700000005000,"snapshotTimestamp":1700000000000,"eventsApplied":2,"crossed":false,"bids":[{"price":"0.78","size":"100"}],"asks":[{"price":"0.8","size":"40"},{"price":"0.81","size":"12.50"}]}
}
