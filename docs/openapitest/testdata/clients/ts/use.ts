// Uses every answer of every /v1 operation through openapi-fetch and the
// types openapi-typescript generated from the edge's served document
// (./api.d.ts). clients_test.go runs
// `tsc --noEmit` over it: a property a client reads that the types lost,
// or a type that changed, fails the check.
import createClient from "openapi-fetch";
import type { components, paths } from "./api";

type S = components["schemas"];
const client = createClient<paths>({ baseUrl: "http://127.0.0.1" });
const headers = { Authorization: "Bearer key" };
const wallet = "0x" + "1".repeat(40);

// Every failure of the /v1 contract: the variant A envelope, data null.
function failure(e: { message: string; status_code: "0"; data: { [key: string]: unknown } | null }): string {
  return `${e.message} ${e.status_code} ${e.data === null}`;
}

// [price, size]: a pair of decimal strings. The schema's type is the
// tuple; openapi-fetch's answers carry it as string[].
export const pair: S["PriceLevel"] = ["0.5", "10"];
const [pairPrice, pairSize]: [string, string] = pair;
function level(l: readonly string[]): string {
  return `${l[0]}${l[1]}${pairPrice}${pairSize}`;
}

function transaction(t: S["Transaction"]): string {
  if (t.sourceType === "TRADE") {
    const combo: S["ComboAction"][] | null = t.comboActions;
    return `${t.marketId}${t.marketSlug}${combo}` + t.actions.map((a) => JSON.stringify(a)).join();
  }
  const market: string | null = t.marketId;
  const actions: S["TransactionAction"][] | null = t.actions;
  return `${market}${t.marketSlug}${actions}` + t.comboActions.map((a) => JSON.stringify(a)).join();
}

function next(c: string | null): string {
  return c === null ? "last page" : c;
}

export async function use(): Promise<string[]> {
  const out: string[] = [];
  const ev = await client.GET("/v1/orderbook/events", { params: { query: { tokenId: ["1"], limit: 10 } }, headers });
  if (ev.data?.data) {
    for (const e of ev.data.data.items) {
      if (e.eventType === "book") {
        const side: string | null = e.side;
        const price: string | null = e.price;
        out.push(`${side}${price}${e.sizeAfter}` + e.bids.map(level).join() + e.asks.map(level).join());
      } else {
        const bids: string[][] | null = e.bids;
        const side: "BUY" | "SELL" = e.side;
        out.push(`${side}${e.price}${e.sizeAfter}${bids}${e.asks}`);
      }
    }
    out.push(next(ev.data.data.nextCursor));
  }
  if (ev.error) out.push(failure(ev.error));

  const act = await client.GET("/v1/trader/{address}/activity", { params: { path: { address: wallet } }, headers });
  if (act.data?.data) out.push(...act.data.data.items.map((i) => `${i.actionType}${i.liquidityRole}`), next(act.data.data.nextCursor));
  if (act.error) out.push(failure(act.error));

  const dw = await client.GET("/v1/trader/{address}/deposits-withdrawals", { params: { path: { address: wallet } }, headers });
  if (dw.data?.data) out.push(...dw.data.data.items.map((i) => `${i.type}`), next(dw.data.data.nextCursor));
  if (dw.error) out.push(failure(dw.error));

  const cpc = await client.GET("/v1/trader/{address}/combo-positions/closed", { params: { path: { address: wallet } }, headers });
  if (cpc.data?.data) out.push(...cpc.data.data.items.map((i) => JSON.stringify(i)), next(cpc.data.data.nextCursor));
  if (cpc.error) out.push(failure(cpc.error));

  const pc = await client.GET("/v1/trader/{address}/positions/closed", { params: { path: { address: wallet } }, headers });
  if (pc.data?.data) out.push(...pc.data.data.items.map((i) => `${i.percentPnl}`), next(pc.data.data.nextCursor));
  if (pc.error) out.push(failure(pc.error));

  const po = await client.GET("/v1/trader/{address}/positions/open", { params: { path: { address: wallet } }, headers });
  if (po.data?.data) out.push(...po.data.data.items.map((i) => `${i.percentPnl}`), next(po.data.data.nextCursor));
  if (po.error) out.push(failure(po.error));

  const tx = await client.GET("/v1/tx/{txHash}", { params: { path: { txHash: "0x" + "a".repeat(64) }, header: { "If-None-Match": '"etag"' } }, headers });
  if (tx.data) out.push(tx.data.data === null ? "not indexed" : transaction(tx.data.data));
  if (tx.error) out.push(failure(tx.error));

  const wa = await client.GET("/v1/trader/wallet-address/{address}", { params: { path: { address: wallet } }, headers });
  if (wa.data) out.push(`${wa.data.data.walletAddress}`);
  if (wa.error) out.push(failure(wa.error));

  const book = await client.GET("/v1/orderbook/book", { params: { query: { tokenId: "1" } }, headers });
  if (book.data) out.push(JSON.stringify(book.data.data));
  if (book.error) out.push(failure(book.error));

  const doc = await client.GET("/v1/openapi.json");
  if (doc.data) out.push(Object.keys(doc.data).join());

  const head = await client.HEAD("/v1/tx/{txHash}", { params: { path: { txHash: "0x" + "a".repeat(64) } }, headers });
  out.push(`${head.response.status}`);
  return out;
}

// Each declared answer of one operation, by status: the body a client
// reads where there is one.
type Tx = paths["/v1/tx/{txHash}"]["get"]["responses"];
type Json<R> = R extends { content: { "application/json": infer B } } ? B : never;
export const statuses: { [K in keyof Tx]: (b: Json<Tx[K]>) => string } = {
  200: (b) => (b.data === null ? "" : transaction(b.data)),
  304: () => "not modified",
  400: failure,
  401: (b) => failure(b) + (b.message === "Missing or invalid API key"),
  403: failure,
  404: failure,
  405: failure,
  410: failure,
  414: failure,
  429: (b) => failure(b) + (b.message === "Rate limit exceeded"),
  431: failure,
  "4XX": failure,
  500: failure,
  502: failure,
  503: failure,
  504: failure,
  505: failure,
};
