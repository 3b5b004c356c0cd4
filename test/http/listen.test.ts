/**
 * The HTTP listener on a real socket: lengths on the wire, request bodies and their limit, a
 * client that leaves, and a stop that lets in-flight requests finish.
 */
import { afterAll, expect, test } from "bun:test";
import { listen } from "../../src/http/listen.ts";
import { onTheWire } from "../support/wire.ts";

const LIMIT = 100_000;
let cancelled: (reason: unknown) => void = () => {};

const server = await listen({
  hostname: "127.0.0.1",
  port: 0,
  maxRequestBodySize: LIMIT,
  error: () => new Response("failed", { status: 500 }),
  async fetch(request) {
    const path = new URL(request.url).pathname;
    if (path === "/json") return Response.json({ hello: "world" });
    if (path === "/echo") {
      if (Number(request.headers.get("content-length") ?? 0) > LIMIT) return Response.json({ Code: "EntityTooLarge" }, { status: 413 });
      try {
        return new Response(`${(await request.arrayBuffer()).byteLength}`);
      } catch (err) {
        return new Response(`body failed: ${(err as Error).message}`, { status: 400 });
      }
    }
    if (path === "/endless") {
      // Known length, produced slowly: tells when the client went away.
      return new Response(
        new ReadableStream<Uint8Array>({
          pull: (c) => c.enqueue(new Uint8Array(64 * 1024)),
          cancel: (reason) => cancelled(reason),
        }, { highWaterMark: 0 }),
        { headers: { "content-length": String(1 << 30) } },
      );
    }
    if (path === "/throws") throw new Error("boom");
    return new Response("not found", { status: 404 });
  },
});
afterAll(() => server.stop(true));
const base = `http://127.0.0.1:${server.port}`;

test("a body of known size gets its Content-Length; a handler that throws gets the error answer", async () => {
  const json = await onTheWire(`${base}/json`);
  expect(json.headers.get("content-length")).toBe(String(json.body.byteLength));
  expect(JSON.parse(new TextDecoder().decode(json.body))).toEqual({ hello: "world" });
  const failed = await onTheWire(`${base}/throws`);
  expect(failed.status).toBe(500);
});

test("a body declared over the limit reaches the app, which refuses it in its own shape", async () => {
  const res = await fetch(`${base}/echo`, { method: "POST", body: new Uint8Array(LIMIT + 1) });
  expect(res.status).toBe(413);
  expect(await res.json()).toEqual({ Code: "EntityTooLarge" });
  expect(await (await fetch(`${base}/echo`, { method: "POST", body: new Uint8Array(LIMIT) })).text()).toBe(String(LIMIT));
});

test("a chunked body is never read past the limit: the app's read fails and it answers", async () => {
  let sent = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(c) {
      if (sent > 4 * LIMIT) return c.close();
      sent += 10_000;
      c.enqueue(new Uint8Array(10_000));
    },
  });
  const res = await fetch(`${base}/echo`, { method: "POST", body, duplex: "half" } as RequestInit);
  expect(res.status).toBe(400);
  expect(await res.text()).toMatch(/larger than 100000 bytes/);
  expect((await fetch(`${base}/json`)).status).toBe(200); // the server goes on
});

test("a client that leaves cancels the answer's body", async () => {
  const gone = new Promise<unknown>((resolve) => (cancelled = resolve));
  const res = await fetch(`${base}/endless`);
  expect(res.headers.get("content-length")).toBe(String(1 << 30));
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  await reader.read();
  await reader.cancel();
  expect(await gone).toBeInstanceOf(Error);
});

test("stop() lets an in-flight request finish and refuses new connections", async () => {
  let entered!: () => void;
  const inHandler = new Promise<void>((resolve) => (entered = resolve));
  let finish!: () => void;
  const other = await listen({
    hostname: "127.0.0.1",
    port: 0,
    maxRequestBodySize: LIMIT,
    error: () => new Response("x", { status: 500 }),
    fetch: () =>
      new Promise<Response>((resolve) => {
        finish = () => resolve(new Response("finished"));
        entered();
      }),
  });
  const url = `http://127.0.0.1:${other.port}/`;
  const inFlight = fetch(url);
  await inHandler;
  expect(other.pendingRequests).toBe(1);
  let stopped = false;
  const stopping = other.stop().then(() => (stopped = true));
  await expect(fetch(url)).rejects.toThrow();
  expect(stopped).toBe(false);
  finish();
  expect(await (await inFlight).text()).toBe("finished");
  await stopping;
  expect(stopped).toBe(true);
  expect(other.pendingRequests).toBe(0);
});
