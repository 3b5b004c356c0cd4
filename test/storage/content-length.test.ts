/**
 * Over a real socket, through the server's own listener and fetch handler (what `stowage serve`
 * runs; `app.handle()` cannot show what goes on the wire): every 200 and 206 download carries
 * Content-Length, not chunked, on both back-ends and whatever the size, and HEAD tells the same
 * length as GET (spec row 5, D14).
 */
import { afterAll, describe, expect, test } from "bun:test";
import type { LocalAccount } from "viem";
import { createHandler } from "../../src/http/handler.ts";
import { listen } from "../../src/http/listen.ts";
import { silentLogger } from "../../src/log.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { testGateway } from "../support/storage.ts";
import { onTheWire as raw } from "../support/wire.ts";

const gw = await testGateway();
const server = await listen({
  hostname: "127.0.0.1",
  port: 0,
  maxRequestBodySize: gw.config.maxBody + 1024 * 1024,
  fetch: createHandler({ handle: (r) => gw.app.handle(r), log: silentLogger, corsOrigins: [], trustProxy: 0 }),
  error: () => new Response("internal error", { status: 500 }),
});
afterAll(() => server.stop(true));
const MiB = 1024 * 1024;
const onTheWire = (method: "GET" | "HEAD", path: string, range?: string) =>
  raw(`http://127.0.0.1:${server.port}${path}`, { method, headers: range ? { range } : {} });

const { account } = await gw.user({ login: false });
const store = await connectStorage({ baseUrl: `http://127.0.0.1:${server.port}`, account });
await store.login();
const used = async (a: LocalAccount) => (await gw.storage?.vouchers.usedBy(a.address)) ?? 0;
/** A download path with a fresh voucher for `bytes` (HEAD needs an unspent one too, but spends nothing). */
async function path(kind: string, cid: string, bytes: number) {
  const size = (await used(account)) + bytes + 1 + Math.floor(Math.random() * 1_000_000);
  return `/${kind}/${cid}?size=${size}&sign=${await gw.sign.voucher(account, size, cid)}`;
}

describe.each(["dfs", "ipfs"] as const)("%s downloads on the wire", (kind) => {
  test.each([
    ["1 MiB + 1", MiB + 1],
    ["5 MiB", 5 * MiB],
  ])("%s bytes: 200 and 206 carry Content-Length, HEAD agrees with GET", async (_, size) => {
    const bytes = new Uint8Array(size).map((_, i) => (i * 31 + size) % 251);
    const { Cid } = await store.upload(kind, bytes, { name: `cl-${size}.bin` });

    const whole = await onTheWire("GET", await path(kind, Cid, size));
    expect(whole.status).toBe(200);
    expect(whole.headers.get("transfer-encoding")).toBeUndefined();
    expect(whole.headers.get("content-length")).toBe(String(size));
    expect(whole.body).toEqual(bytes);

    // A range across a chunk boundary, past the first MiB.
    const [from, to] = [MiB - 7, size - 2];
    const part = await onTheWire("GET", await path(kind, Cid, to - from + 1), `bytes=${from}-${to}`);
    expect(part.status).toBe(206);
    expect(part.headers.get("transfer-encoding")).toBeUndefined();
    expect(part.headers.get("content-length")).toBe(String(to - from + 1));
    expect(part.headers.get("content-range")).toBe(`bytes ${from}-${to}/${size}`);
    expect(part.body).toEqual(bytes.slice(from, to + 1));

    const head = await onTheWire("HEAD", await path(kind, Cid, 0));
    expect(head.status).toBe(200);
    expect(head.headers.get("content-length")).toBe(String(size));
    expect(head.body.byteLength).toBe(0);
    const headPart = await onTheWire("HEAD", await path(kind, Cid, 0), `bytes=${from}-${to}`);
    expect(headPart.status).toBe(206);
    expect(headPart.headers.get("content-length")).toBe(part.headers.get("content-length") as string);
    expect(headPart.headers.get("content-range")).toBe(part.headers.get("content-range") as string);
    expect(headPart.body.byteLength).toBe(0);
  });
});

test("small downloads and JSON answers carry Content-Length too", async () => {
  const small = crypto.getRandomValues(new Uint8Array(100_000));
  const { Cid } = await store.upload("dfs", small, { name: "small.bin" });
  const one = await onTheWire("GET", await path("dfs", Cid, small.length));
  expect(one.headers.get("content-length")).toBe(String(small.length));
  expect(one.body).toEqual(small);
  const health = await onTheWire("GET", "/healthz");
  expect(health.headers.get("content-length")).toBe(String(health.body.byteLength));
});

test("a client that leaves half way is charged only what was sent, and the server goes on", async () => {
  const size = 32 * MiB;
  const { Cid } = await store.upload("dfs", new Uint8Array(size), { name: "leave-early.bin" });
  const before = await used(account);
  const res = await fetch(`http://127.0.0.1:${server.port}${await path("dfs", Cid, size)}`);
  expect(res.headers.get("content-length")).toBe(String(size));
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  await reader.read();
  await reader.cancel();
  // The server settles once it sees the connection go; a later request sees the settled counter.
  let settled = await used(account);
  for (let i = 0; i < 200 && settled === before; i++) {
    await new Promise((r) => setTimeout(r, 10));
    settled = await used(account);
  }
  expect(settled).toBeGreaterThan(before);
  expect(settled - before).toBeLessThan(size);
});
