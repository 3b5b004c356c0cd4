/**
 * The HTTP listener: Bun's `node:http` server in front of a fetch-style handler. Not Bun.serve,
 * because Bun.serve drops a Content-Length set on a streamed body and sends it chunked
 * (oven-sh/bun#10507), and D14 (spec row 5) promises every 200/206 download its length while
 * downloads stream (memory must not grow with the file). `node:http` sends the length it is
 * given and frames the streamed bytes by it.
 *
 * What Bun.serve did and the app relies on is kept: a body is never read past
 * `maxRequestBodySize`, a request's `signal` aborts when its client goes away, a response body is
 * read only as fast as the client takes it (backpressure) and cancelled when the client leaves (so
 * a download settles what was really sent), and a body of known size (string, JSON, Blob) gets
 * its length.
 *
 * What a client may hold open is bounded: a connection silent for the idle timeout is closed, and
 * a request body must also keep a minimum rate (`minBodyRate`), so that one sent a byte at a time
 * cannot hold a socket and a request for ever.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { requestError } from "./errors.ts";
import { giveBack, markDisposable } from "./lent.ts";

export interface Listener {
  /** The port it listens on (the real one when 0 was asked for). */
  readonly port: number;
  /** Requests whose answers have not finished. */
  readonly pendingRequests: number;
  /** The client's address of a request this listener received. */
  requestIP(request: Request): { address: string } | null;
  /** The request target exactly as the client sent it (before the URL parser resolved its dot
   * segments), of a request this listener received. */
  requestTarget(request: Request): string | undefined;
  /** Stops accepting; resolves once in-flight requests are done, or at once after cutting them (`force`). */
  stop(force?: boolean): Promise<void>;
}

export interface ListenOptions {
  hostname: string;
  port: number;
  /** A request body is cut (its stream errors, its connection closes) past this many bytes. */
  maxRequestBodySize: number;
  fetch(request: Request, listener: Listener): Promise<Response> | Response;
  /** The answer when `fetch` throws. */
  error(err: Error): Response;
  /** The answer to a request that cannot be handed to `fetch` (a Host or header no URL or Headers
   * takes), by its path; default: the storage or account API's error, as the path names it. */
  malformed?: (path: string) => Response;
  /** A connection whose client sends nothing while the app waits for its body, or takes nothing
   * of an answer, for this long is closed (Bun.serve's default: 10 s); the time the app takes
   * before it reads a body or while it decides an answer does not count. */
  idleTimeoutMs?: number;
  /** A request body that brings fewer than this many bytes per second, counted over each idle
   * timeout's worth of time the app waits for it, is cut (its connection closed): a client that
   * trickles a byte now and then is never silent long enough for the idle timeout. Time the app
   * does not read (a store slower than the client) does not count. 0 or absent: no minimum. */
  minBodyRate?: number;
}

/** Bodies of known length up to this are read whole and sent in one write. */
const WHOLE_MAX = 1024 * 1024;

/** Statuses whose answers never carry a body. */
const NO_BODY = new Set([101, 204, 205, 304]);

export async function listen(opts: ListenOptions): Promise<Listener> {
  const ips = new WeakMap<Request, string>();
  const targets = new WeakMap<Request, string>();
  let pending = 0;
  let drained: (() => void) | undefined;
  const server = createServer({ requestTimeout: 0, keepAliveTimeout: 5_000 }, (req, res) => {
    pending++;
    // One listener per request: the count of requests in flight, and the abort of a request whose
    // client went away before its answer was written.
    const abort = new AbortController();
    res.once("close", () => {
      if (!res.writableFinished) abort.abort(new Error("the client went away"));
      if (--pending === 0) drained?.();
    });
    serveOne(req, res, abort).catch(() => res.destroy());
  });
  // Uploads may take hours: only a connection that goes silent is closed. Bun's node:http counts
  // only bytes received as activity, so `write` re-arms the timer for bytes sent (a long download).
  const idleMs = opts.idleTimeoutMs ?? 10_000;
  server.setTimeout(idleMs, (socket) => socket.destroy());

  const listener: Listener = {
    get port() {
      return (server.address() as AddressInfo).port;
    },
    get pendingRequests() {
      return pending;
    },
    requestTarget: (request) => targets.get(request),
    requestIP: (request) => {
      const address = ips.get(request);
      return address === undefined ? null : { address };
    },
    stop(force = false) {
      if (server.listening) server.close();
      if (force || pending === 0) {
        server.closeAllConnections();
        return Promise.resolve();
      }
      // In-flight requests finish; idle keep-alive connections go at once, the rest once done.
      server.closeIdleConnections();
      return new Promise<void>((resolve) => {
        drained = () => {
          server.closeAllConnections();
          resolve();
        };
      });
    },
  };

  async function serveOne(req: IncomingMessage, res: ServerResponse, abort: AbortController) {
    // A body declared too large goes to the app all the same: its routes refuse it before reading
    // (413 in the spec's shape), and the count in `bodyOf` stops one that lied about its length.
    let request: Request;
    try {
      request = toRequest(req, opts, abort.signal, idleMs);
    } catch {
      // Not a request the app can be handed (a Host or a header that no URL or Headers takes):
      // answered here, in the shape of the API its path names, and the connection goes.
      const path = (req.url ?? "/").split("?")[0] as string;
      const refused = opts.malformed ? opts.malformed(path) : requestError.malformed(path).toResponse();
      refused.headers.set("connection", "close");
      await send(req, res, refused, idleMs);
      return;
    }
    if (req.socket.remoteAddress) ips.set(request, req.socket.remoteAddress);
    if (req.url !== undefined) targets.set(request, req.url);
    // While the app decides its answer, the client is not silent, it waits: the idle timer stops
    // (`bodyOf` runs it while the app waits for body bytes) and starts again with the answer. A
    // purchase waits for its receipt, a block or more on a real chain: far past the idle timeout.
    if (request.body === null) req.socket.setTimeout(0);
    let response: Response;
    try {
      response = await opts.fetch(request, listener);
    } catch (err) {
      response = opts.error(err instanceof Error ? err : new Error(String(err)));
    }
    req.socket.setTimeout(idleMs);
    await send(req, res, response, idleMs);
    // A body the app did not read (a refused upload) is not drained: the connection goes.
    if (!req.complete) req.destroy();
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.hostname, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return listener;
}

/** A Host header that is a name or address and an optional port, nothing else. */
const PLAIN_HOST = /^[A-Za-z0-9.\-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/;

function toRequest(req: IncomingMessage, opts: ListenOptions, signal: AbortSignal, idleMs: number): Request {
  // The few headers read here come from the raw list: `req.headers` would build a second,
  // parsed copy of them all (node:http builds it lazily, on first use).
  const headers = new Headers();
  const raw = req.rawHeaders;
  let host: string | undefined;
  let framed = false;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string;
    const value = raw[i + 1] as string;
    headers.append(name, value);
    if (name.length === 4 && host === undefined && name.toLowerCase() === "host") host = value;
    else if (!framed && (name.length === 14 || name.length === 17)) {
      const lower = name.toLowerCase();
      framed = lower === "transfer-encoding" || (lower === "content-length" && Number(value) > 0);
    }
  }
  const path = req.url ?? "/";
  const base = `http://${host ?? `${opts.hostname}:${opts.port}`}`;
  // An origin-form target ("/path?query") behind a plain host[:port] is joined as text and parsed
  // once, by the Request; anything else (an absolute target, a Host with other characters, which
  // could carry a path, query or fragment of its own) goes through the URL parser as before.
  const plain = path.startsWith("/") && !path.startsWith("//") && (host === undefined || PLAIN_HOST.test(host));
  const href = plain ? `${base}${path}` : new URL(path, base).href;
  const method = req.method ?? "GET";
  const hasBody = method !== "GET" && method !== "HEAD" && framed;
  const init: RequestInit & { duplex?: "half" } = { method, headers, signal };
  if (hasBody) {
    init.body = bodyOf(req, opts.maxRequestBodySize, idleMs, opts.minBodyRate ?? 0);
    init.duplex = "half";
  }
  return new Request(href, init);
}

/**
 * The request body as a web stream that reads the socket only as fast as the app reads it. The
 * idle timer runs only while the stream has room and waits for the client: a client held back
 * (the app busy before it reads, or slower than the client: a store that stalls) is not silent.
 *
 * The minimum rate is counted over the same waiting time: each `idleMs` of it must bring
 * `minRate × idleMs` bytes, or the connection is closed, as a silent one is. A client that sends a
 * byte every few seconds keeps the idle timer from ever firing; this cuts it within `idleMs` of
 * waiting, while an upload at any real rate goes on for as long as it takes.
 */
function bodyOf(req: IncomingMessage, max: number, idleMs: number, minRate: number): ReadableStream<Uint8Array> {
  let seen = 0;
  let done = false;
  /** Bytes each window of waiting must bring. */
  const need = (minRate * idleMs) / 1000;
  /** The window: waiting time before `waitingSince`, the time the current wait began (undefined
   * while held), and the bytes that came in it. */
  let waited = 0;
  let waitingSince: number | undefined;
  let got = 0;
  let rateTimer: ReturnType<typeof setTimeout> | undefined;
  let tooSlow = () => {};
  const stopRate = () => {
    if (rateTimer !== undefined) clearTimeout(rateTimer);
    rateTimer = undefined;
  };
  const checkRate = () => {
    rateTimer = undefined;
    if (done) return;
    const now = performance.now();
    const spent = waited + (waitingSince === undefined ? 0 : now - waitingSince);
    if (spent < idleMs) {
      // Held for part of the window: it ends once the rest of it has been waited.
      rateTimer = setTimeout(checkRate, idleMs - spent);
      return;
    }
    if (got < need) return tooSlow();
    waited = 0;
    got = 0;
    if (waitingSince !== undefined) waitingSince = now;
    rateTimer = setTimeout(checkRate, idleMs);
  };
  const hold = () => {
    req.pause();
    req.socket.setTimeout(0);
    if (waitingSince !== undefined) {
      waited += performance.now() - waitingSince;
      waitingSince = undefined;
    }
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      req.on("data", (chunk: Buffer) => {
        if (done) return;
        seen += chunk.byteLength;
        got += chunk.byteLength;
        if (seen > max) {
          done = true;
          stopRate();
          // The app answers the failed read; the connection goes after that answer (`serveOne`).
          controller.error(new Error(`the body is larger than ${max} bytes`));
          hold();
          return;
        }
        markDisposable(chunk); // the chunker frees it once copied (lent.ts)
        controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
        if ((controller.desiredSize ?? 0) <= 0) hold();
      });
      req.once("end", () => {
        stopRate();
        req.socket.setTimeout(0); // all in: the app decides its answer
        if (done) return;
        done = true;
        controller.close();
      });
      const broken = (err?: Error) => {
        stopRate();
        if (done) return;
        done = true;
        controller.error(err ?? new Error("the client went away"));
      };
      tooSlow = () => {
        broken(new Error(`the body came slower than ${minRate} bytes/s`));
        req.socket.destroy(); // as a silent client's connection is
      };
      req.once("error", broken);
      req.once("close", () => {
        if (!req.complete) broken();
      });
      hold();
    },
    pull() {
      req.socket.setTimeout(idleMs);
      if (need > 0) {
        waitingSince ??= performance.now();
        rateTimer ??= setTimeout(checkRate, Math.max(0, idleMs - waited));
      }
      req.resume();
    },
    cancel() {
      done = true;
      stopRate();
      hold();
    },
  });
}

/**
 * A JSON answer without a length: the app's own (Elysia serialises a route's value into one
 * string), never a stream of unknown size, so it is read whole and sent with its length.
 */
const isWholeJson = (response: Response) =>
  !response.headers.has("content-length") && (response.headers.get("content-type") ?? "").startsWith("application/json");

/** Writes a web Response: its headers, then its body as fast as the client takes it. */
async function send(req: IncomingMessage, res: ServerResponse, response: Response, idleMs: number) {
  if (response.body && !NO_BODY.has(response.status) && isWholeJson(response)) {
    // The small answers' path (most requests): one read of the body, then the head and the body
    // in one writeHead + end, with no web-stream reader and no per-header setHeader.
    let bytes: Uint8Array;
    try {
      bytes = await response.bytes();
    } catch {
      res.destroy();
      return;
    }
    const head: string[] = [];
    for (const [name, value] of response.headers) head.push(name, value);
    head.push("content-length", String(bytes.byteLength));
    res.writeHead(response.status, response.statusText || undefined, head);
    res.end(req.method === "HEAD" ? undefined : bytes);
    return;
  }
  res.statusCode = response.status;
  if (response.statusText) res.statusMessage = response.statusText;
  for (const [name, value] of response.headers) if (name !== "set-cookie") res.setHeader(name, value);
  const cookies = response.headers.getSetCookie();
  if (cookies.length) res.setHeader("set-cookie", cookies);

  const body = response.body;
  if (!body || NO_BODY.has(response.status)) {
    if (!res.hasHeader("content-length") && !NO_BODY.has(response.status)) res.setHeader("content-length", "0");
    await body?.cancel().catch(() => {});
    return finish(res);
  }
  if (req.method === "HEAD" && res.hasHeader("content-length")) {
    await body.cancel().catch(() => {});
    return finish(res);
  }
  const declared = Number(res.getHeader("content-length") ?? Number.NaN);
  if (declared <= WHOLE_MAX) {
    // Small bodies of known length (a small download, a file part of the app) go in one write:
    // node:http costs a fixed amount per write. Read through the body's reader, not
    // response.arrayBuffer(): that copies even a body of one part (a ranged GET's 1 MiB).
    let whole: { bytes: Buffer; parts: Uint8Array[] };
    try {
      whole = await wholeBody(body);
    } catch {
      res.destroy();
      return;
    }
    // Parts lent from a pool (lent.ts: a ranged GET's) go back once written, as `write`'s do.
    return new Promise<void>((resolve) =>
      res.end(whole.bytes, () => {
        for (const part of whole.parts) giveBack(part);
        resolve();
      }),
    );
  }
  const reader = body.getReader();
  const gone = () => void reader.cancel(new Error("the client went away")).catch(() => {});
  res.once("close", gone);
  try {
    let first = await reader.read();
    if (!res.hasHeader("content-length")) {
      // A body of known size (text, JSON, a Blob) comes whole in one read: it gets its length.
      const second = first.done ? first : await reader.read();
      if (second.done) {
        const bytes = first.done ? new Uint8Array(0) : first.value;
        res.setHeader("content-length", String(bytes.byteLength));
        // Head and body in one end(): node:http costs a fixed amount per write.
        if (req.method !== "HEAD") return await new Promise<void>((resolve) => res.end(bytes, () => resolve()));
        return await finish(res);
      }
      if (req.method === "HEAD") {
        await reader.cancel().catch(() => {});
        return await finish(res);
      }
      await write(res, first.value as Uint8Array, idleMs);
      first = second;
    }
    for (let next = first; !next.done; next = await reader.read()) {
      if (res.destroyed) return;
      await write(res, next.value, idleMs);
    }
    await finish(res);
  } catch {
    // The body failed half way (a damaged chunk): the client must see a cut answer, not a short one.
    res.destroy();
  } finally {
    res.off("close", gone);
  }
}

/** A body read to its end, with the parts it came in: a body of one part is that part as it is
 * (no copy), more are joined. */
async function wholeBody(body: ReadableStream<Uint8Array>): Promise<{ bytes: Buffer; parts: Uint8Array[] }> {
  const parts: Uint8Array[] = [];
  const reader = body.getReader();
  for (let next = await reader.read(); !next.done; next = await reader.read()) parts.push(next.value);
  const only = parts.length === 1 ? (parts[0] as Uint8Array) : undefined;
  return { bytes: only ? Buffer.from(only.buffer, only.byteOffset, only.byteLength) : Buffer.concat(parts), parts };
}

/** Writes one chunk, waiting while the socket's buffer is full (backpressure). Bytes sent are
 * activity: the idle timer starts again (Bun's node:http does not, and cut every download that
 * lasted longer than the idle timeout after the request's last byte). A chunk lent from a pool
 * (lent.ts: a download's) goes back to it once written: not when `write` returns, since Bun keeps
 * a reference to the bytes until they are flushed, but when its callback says so. */
function write(res: ServerResponse, chunk: Uint8Array, idleMs: number): Promise<void> {
  res.socket?.setTimeout(idleMs);
  if (res.write(chunk, (err) => err || giveBack(chunk))) return Promise.resolve();
  return new Promise((resolve) => {
    const go = () => {
      res.off("drain", go);
      res.off("close", go);
      resolve();
    };
    res.once("drain", go);
    res.once("close", go);
  });
}

function finish(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => res.end(() => resolve()));
}
