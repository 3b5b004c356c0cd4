/**
 * Over a real socket (Bun.serve in front of the app): a download of up to one chunk carries its
 * Content-Length on the wire; a larger one streams, byte-exact, with its length in Content-Range.
 */
import { afterAll, expect, test } from "bun:test";
import { connectStorage } from "../../src/sdk/storage.ts";
import { WHOLE_BODY_MAX } from "../../src/storage/service.ts";
import { testGateway } from "../support/storage.ts";

const gw = await testGateway({ ipfs: false });
const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (r) => gw.app.handle(r) });
afterAll(() => server.stop(true));
// The SDK talks HTTP to the socket; /chain's rpcUrl points at the test's base, so discovery
// goes through the app while transfers go over the wire.
const base = `http://127.0.0.1:${server.port}`;

test("small downloads are sent whole with Content-Length; large ones stream", async () => {
  const { account } = await gw.user({ login: false });
  const store = await connectStorage({ baseUrl: base, account });
  await store.login();
  const small = crypto.getRandomValues(new Uint8Array(100_000));
  const big = new Uint8Array(WHOLE_BODY_MAX * 3 + 17).map((_, i) => (i * 7) % 251);
  const a = await store.upload("dfs", small, { name: "small.bin" });
  const b = await store.upload("dfs", big, { name: "big.bin" });

  const one = await store.download("dfs", a.Cid, { size: small.length });
  expect(one.headers.get("content-length")).toBe(String(small.length));
  expect(new Uint8Array(await one.arrayBuffer())).toEqual(small);

  const range = await store.download("dfs", b.Cid, { range: [WHOLE_BODY_MAX - 10, WHOLE_BODY_MAX + 9] });
  expect(range.headers.get("content-length")).toBe("20");
  expect(new Uint8Array(await range.arrayBuffer())).toEqual(big.slice(WHOLE_BODY_MAX - 10, WHOLE_BODY_MAX + 10));

  const whole = await store.download("dfs", b.Cid, { range: [0, big.length - 1] });
  expect(whole.headers.get("content-range")).toBe(`bytes 0-${big.length - 1}/${big.length}`);
  expect(new Uint8Array(await whole.arrayBuffer())).toEqual(big);
});
