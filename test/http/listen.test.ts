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
    if (path === "/url") return Response.json({ url: request.url, body: request.body !== null });
    if (path === "/json-cookies") {
      const headers = new Headers({ "x-one": "1" });
      headers.append("set-cookie", "a=1; Path=/");
      headers.append("set-cookie", "b=2; Path=/");
      return Response.json({ made: true }, { status: 201, statusText: "Made", headers });
    }
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
    if (path === "/parts") {
      // A small body of declared length as a stream: one part (a view into a larger buffer, as a
      // ranged GET's body is), several parts, or none.
      const whole = new Uint8Array(300).map((_, i) => i % 251);
      const n = Number(new URL(request.url).searchParams.get("n"));
      const parts = n === 0 ? [] : n === 1 ? [whole.subarray(100, 200)] : [whole.subarray(100, 130), whole.subarray(130, 131), whole.subarray(131, 200)];
      return new Response(
        new ReadableStream<Uint8Array>({
          pull(c) {
            for (const part of parts) c.enqueue(part);
            c.close();
          },
        }),
        { headers: { "content-length": String(n === 0 ? 0 : 100) } },
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

test("a small streamed body of declared length goes out whole, exactly its bytes: one part, several, none", async () => {
  const want = new Uint8Array(300).map((_, i) => i % 251).subarray(100, 200);
  for (const n of [1, 3]) {
    const got = await onTheWire(`${base}/parts?n=${n}`);
    expect(got.headers.get("content-length")).toBe("100");
    expect(Buffer.from(got.body).equals(Buffer.from(want))).toBe(true);
  }
  const none = await onTheWire(`${base}/parts?n=0`);
  expect(none.headers.get("content-length")).toBe("0");
  expect(none.body.byteLength).toBe(0);
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

test("a download that lasts longer than the idle timeout is not cut while bytes flow; a silent one is", async () => {
  const IDLE_MS = 300;
  const CHUNK = 64 * 1024;
  const CHUNKS = 20; // 1.25 MiB: past the one-write size, so it streams
  const other = await listen({
    hostname: "127.0.0.1",
    port: 0,
    maxRequestBodySize: LIMIT,
    idleTimeoutMs: IDLE_MS,
    error: () => new Response("x", { status: 500 }),
    fetch(request) {
      const silent = new URL(request.url).pathname === "/silent";
      let sent = 0;
      // A body produced slowly (a slow store), 50 ms a chunk: about 1 s in all, over 3 idle timeouts.
      const body = new ReadableStream<Uint8Array>(
        {
          async pull(c) {
            if (sent === CHUNKS) return c.close();
            if (silent && sent === 1) return new Promise<void>(() => {}); // nothing more, ever
            if (sent > 0) await Bun.sleep(50);
            sent++;
            c.enqueue(new Uint8Array(CHUNK).fill(sent));
          },
        },
        { highWaterMark: 0 },
      );
      return new Response(body, { headers: { "content-length": String(CHUNK * CHUNKS) } });
    },
  });
  try {
    const began = performance.now();
    const res = await fetch(`http://127.0.0.1:${other.port}/slow`);
    const bytes = new Uint8Array(await res.arrayBuffer());
    expect(performance.now() - began).toBeGreaterThan(2 * IDLE_MS);
    expect(bytes.byteLength).toBe(CHUNK * CHUNKS);
    expect(bytes[bytes.length - 1]).toBe(CHUNKS);

    // Once nothing moves for the idle timeout, the connection goes (the body is cut, not short).
    const stalled = await fetch(`http://127.0.0.1:${other.port}/silent`);
    await expect(stalled.arrayBuffer()).rejects.toThrow();
  } finally {
    await other.stop(true);
  }
});

test("an app that takes longer than the idle timeout to decide, or to start reading a body, is not cut; a client silent mid-body is", async () => {
  const IDLE_MS = 300;
  let upload: Promise<string> | undefined;
  const other = await listen({
    hostname: "127.0.0.1",
    port: 0,
    maxRequestBodySize: 16 * 1024 * 1024,
    idleTimeoutMs: IDLE_MS,
    error: () => new Response("x", { status: 500 }),
    async fetch(request) {
      if (new URL(request.url).pathname === "/upload") {
        upload = request.text().then(
          (text) => `read ${text.length}`,
          () => "failed",
        );
        return new Response(await upload);
      }
      if (new URL(request.url).pathname === "/late") {
        // A store that stalls before it takes the body: the client is held back, not silent.
        await Bun.sleep(3 * IDLE_MS);
        return Response.json({ read: (await request.arrayBuffer()).byteLength });
      }
      const body = request.body ? await request.text() : "";
      await Bun.sleep(3 * IDLE_MS); // a purchase waiting for its receipt, say
      return Response.json({ decided: request.method, body });
    },
  });
  try {
    const get = await fetch(`http://127.0.0.1:${other.port}/slow`);
    expect(await get.json()).toEqual({ decided: "GET", body: "" });
    const post = await fetch(`http://127.0.0.1:${other.port}/slow`, { method: "POST", body: "hello" });
    expect(await post.json()).toEqual({ decided: "POST", body: "hello" });
    for (const size of [1_000, 8 * 1024 * 1024]) {
      const late = await fetch(`http://127.0.0.1:${other.port}/late`, { method: "POST", body: new Uint8Array(size) });
      expect(await late.json()).toEqual({ read: size });
    }

    // A body declared 100 bytes long of which 10 come, then nothing: the connection goes, and the
    // app's read of the body fails rather than waiting forever.
    let closed!: () => void;
    const ended = new Promise<void>((resolve) => (closed = resolve));
    const socket = await Bun.connect({ hostname: "127.0.0.1", port: other.port, socket: { data: () => {}, close: () => closed(), error: () => closed() } });
    socket.write("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789");
    await ended;
    expect(await upload).toBe("failed");
  } finally {
    await other.stop(true);
  }
});

/** Sends raw bytes on a connection of its own and reads the answer until the server closes. */
async function raw(text: string): Promise<{ status: number; headers: string; body: string }> {
  const parts: Buffer[] = [];
  let closed!: () => void;
  const ended = new Promise<void>((resolve) => (closed = resolve));
  const socket = await Bun.connect({
    hostname: "127.0.0.1",
    port: server.port,
    socket: { data: (_, d) => void parts.push(Buffer.from(d)), close: () => closed(), error: () => closed() },
  });
  socket.write(text);
  await ended;
  const answer = Buffer.concat(parts).toString("latin1");
  const end = answer.indexOf("\r\n\r\n");
  return { status: Number(answer.split(" ")[1]), headers: answer.slice(0, end).toLowerCase(), body: answer.slice(end + 4) };
}

test("a request the app cannot be handed (a Host no URL takes) is 400 in the API's shape, and the connection goes", async () => {
  const storage = await raw("GET /dfs/listobjects HTTP/1.1\r\nHost: bad host\r\n\r\n");
  expect(storage.status).toBe(400);
  expect(storage.headers).toContain("content-type: application/json");
  expect(JSON.parse(storage.body)).toEqual({ Code: "InvalidArgument", Description: expect.stringContaining("Malformed request"), HTTPStatusCode: 400 });
  const account = await raw("GET /v2/auth/me HTTP/1.1\r\nHost: bad host\r\n\r\n");
  expect(account.status).toBe(400);
  expect(JSON.parse(account.body)).toEqual({ result: -1, error: "PARAM_ERROR", message: expect.stringContaining("Malformed request") });
  expect((await fetch(`${base}/json`)).status).toBe(200); // the server goes on
});

test("a JSON answer goes out whole with its length, status text and every header (each Set-Cookie); HEAD gets the length alone", async () => {
  const made = await raw(`GET /json-cookies HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
  expect(made.status).toBe(201);
  expect(made.headers.split("\r\n")[0]).toBe("http/1.1 201 made");
  expect(made.headers).toContain(`content-length: ${Buffer.byteLength(made.body)}`);
  expect(made.headers).not.toContain("transfer-encoding");
  expect(made.headers).toContain("x-one: 1");
  expect(made.headers).toContain("set-cookie: a=1; path=/");
  expect(made.headers).toContain("set-cookie: b=2; path=/");
  expect(JSON.parse(made.body)).toEqual({ made: true });
  const head = await raw(`HEAD /json HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
  expect(head.status).toBe(200);
  expect(head.headers).toContain(`content-length: ${JSON.stringify({ hello: "world" }).length}`);
  expect(head.body).toBe("");
});

test("the app sees the URL the request named: Host and target, and a Host that is no plain name cannot move the path", async () => {
  const url = async (target: string, host: string, extra = "") =>
    JSON.parse((await raw(`GET ${target} HTTP/1.1\r\nHost: ${host}\r\n${extra}Connection: close\r\n\r\n`)).body) as { url: string; body: boolean };
  expect(await url("/url?a=1&b=%20", "example.com:8080")).toEqual({ url: "http://example.com:8080/url?a=1&b=%20", body: false });
  expect((await url("/url", "[::1]:9")).url).toBe("http://[::1]:9/url");
  expect((await url("/x/../url", "example.com")).url).toBe("http://example.com/url");
  // A Host with a path, a query or a fragment of its own names a host, never where the request goes.
  expect((await url("/url", "example.com/v2")).url).toBe("http://example.com/url");
  expect((await url("/url?q", "example.com?x=")).url).toBe("http://example.com/url?q");
  expect((await url("/url", "example.com#f")).url).toBe("http://example.com/url");
  // The absolute form names its own host.
  expect((await url("http://other.example/url?z", "example.com")).url).toBe("http://other.example/url?z");
  // A POST without a body gets none; with a length it gets one.
  const post = async (extra: string) => JSON.parse((await raw(`POST /url HTTP/1.1\r\nHost: h\r\n${extra}Connection: close\r\n\r\n${extra ? "ab" : ""}`)).body);
  expect((await post("")).body).toBe(false);
  expect((await post("Content-Length: 2\r\n")).body).toBe(true);
});

test("a body below the minimum rate is cut within one idle timeout of waiting; a slow steady one, or one the app holds back, is not", async () => {
  const IDLE_MS = 400;
  const RATE = 10_000; // bytes per second: 4,000 bytes per window
  const reads: Promise<string>[] = [];
  const other = await listen({
    hostname: "127.0.0.1",
    port: 0,
    maxRequestBodySize: 16 * 1024 * 1024,
    idleTimeoutMs: IDLE_MS,
    minBodyRate: RATE,
    error: () => new Response("x", { status: 500 }),
    async fetch(request) {
      // A store that stalls before it takes the body holds the client back: that time is not the client's.
      if (new URL(request.url).pathname === "/late") await Bun.sleep(3 * IDLE_MS);
      const read = request.arrayBuffer().then(
        (b) => `read ${b.byteLength}`,
        () => "failed",
      );
      reads.push(read);
      return new Response(await read);
    },
  });
  /** Sends `total` bytes of a body in pieces of `piece`, one every `everyMs`; resolves with the
   * answer's status line, or "closed", and when that came. */
  async function send(path: string, total: number, piece: number, everyMs: number) {
    let answer = "";
    let closed!: () => void;
    const ended = new Promise<void>((resolve) => (closed = resolve));
    const socket = await Bun.connect({
      hostname: "127.0.0.1",
      port: other.port,
      socket: { data: (_, d) => void (answer += Buffer.from(d).toString("latin1")), close: () => closed(), error: () => closed() },
    });
    const began = performance.now();
    socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: ${total}\r\n\r\n`);
    let gone = false;
    void ended.then(() => (gone = true));
    for (let sent = 0; sent < total && !gone; sent += piece) {
      socket.write(new Uint8Array(Math.min(piece, total - sent)));
      await Promise.race([Bun.sleep(everyMs), ended]);
    }
    await ended;
    return { answer: answer.split("\r\n")[0] || "closed", body: answer.slice(answer.indexOf("\r\n\r\n") + 4), ms: performance.now() - began };
  }
  try {
    const [trickle, steady, late] = await Promise.all([
      // A byte every 100 ms: never silent for the idle timeout, far below the rate.
      send("/upload", 1_000, 1, 100),
      // 1,000 bytes every 50 ms (20,000 B/s, twice the minimum), for 2 s: five windows.
      send("/upload", 40_000, 1_000, 50),
      // Above the rate, and held back for 3 windows before the app reads at all.
      send("/late", 24_000, 1_500, 100),
    ]);
    expect(trickle.answer).toBe("closed");
    expect(trickle.ms).toBeLessThan(IDLE_MS * 2);
    expect(trickle.ms).toBeGreaterThanOrEqual(IDLE_MS - 50);
    expect(steady).toMatchObject({ answer: "HTTP/1.1 200 OK", body: "read 40000" });
    expect(steady.ms).toBeGreaterThan(IDLE_MS * 4);
    expect(late).toMatchObject({ answer: "HTTP/1.1 200 OK", body: "read 24000" });
    // The app's read of the trickled body failed: it does not wait for it for ever.
    expect((await Promise.all(reads)).sort()).toEqual(["failed", "read 24000", "read 40000"]);
  } finally {
    await other.stop(true);
  }
});
