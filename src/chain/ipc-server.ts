/**
 * A JSON-RPC 2.0 server on a Unix socket, speaking the way geth's and anvil's IPC do: requests
 * and batches are JSON values one after another on the stream (with or without newlines, split
 * across packets however the kernel likes), answers go back one JSON value per line. It lets the
 * admin command line reach the in-process chain, which has no port; the socket lives in the 0700
 * data dir and is itself 0600, so only the data dir's owner can talk to it.
 *
 * @example
 *   const ipc = await serveJsonRpcSocket("data/chain/chain.ipc", chain.request)
 *   await ipc.close()
 */
import { chmodSync, lstatSync, unlinkSync } from "node:fs";
import type { Socket } from "bun";

type Request = (args: { method: string; params?: unknown[] }) => Promise<unknown>;
type Id = string | number | null;

/** A buffered request bigger than this is refused and the connection closed. */
const MAX_PENDING_BYTES = 16 * 1024 * 1024;

/**
 * Cuts complete top-level JSON values (objects or arrays) out of a stream of text. Tracks only
 * nesting, strings and escapes; JSON.parse judges each value afterwards.
 */
export class JsonSplitter {
  private buffer = "";
  private scanned = 0;
  private depth = 0;
  private inString = false;
  private escaped = false;
  private start = -1;

  get pending() {
    return this.buffer.length;
  }

  /** Feeds text; returns the values completed by it, as text. Throws on text that cannot start
   * a JSON object or array. */
  push(text: string): string[] {
    this.buffer += text;
    const out: string[] = [];
    const s = this.buffer;
    let i = this.scanned;
    for (; i < s.length; i++) {
      const ch = s[i]!;
      if (this.depth === 0) {
        if (ch === " " || ch === "\n" || ch === "\r" || ch === "\t") continue;
        if (ch !== "{" && ch !== "[") throw new SyntaxError(`unexpected ${JSON.stringify(ch)} between JSON values`);
        this.start = i;
        this.depth = 1;
        continue;
      }
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (ch === "\\") this.escaped = true;
        else if (ch === '"') this.inString = false;
        continue;
      }
      if (ch === '"') this.inString = true;
      else if (ch === "{" || ch === "[") this.depth++;
      else if (ch === "}" || ch === "]") {
        this.depth--;
        if (this.depth === 0) {
          out.push(s.slice(this.start, i + 1));
          this.start = -1;
        }
      }
    }
    // Keep only the unfinished value.
    if (this.depth === 0) {
      this.buffer = "";
      this.scanned = 0;
    } else {
      this.buffer = s.slice(this.start);
      this.scanned = i - this.start;
      this.start = 0;
    }
    return out;
  }
}

const errorBody = (id: Id, code: number, message: string, data?: unknown) => ({
  jsonrpc: "2.0" as const,
  id,
  error: data === undefined ? { code, message } : { code, message, data },
});

function toErrorBody(id: Id, err: unknown) {
  const e = err as { code?: unknown; message?: unknown; data?: unknown };
  if (typeof e?.code === "number" && Number.isInteger(e.code)) return errorBody(id, e.code, String(e.message ?? "error"), e.data);
  return errorBody(id, -32603, `internal error: ${String(e?.message ?? err)}`);
}

/** Answers one request object; undefined for a notification (no id). */
async function answer(request: Request, raw: unknown): Promise<object | undefined> {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return errorBody(null, -32600, "invalid request");
  const r = raw as { id?: unknown; method?: unknown; params?: unknown };
  const id: Id = typeof r.id === "string" || typeof r.id === "number" ? r.id : null;
  const notification = !("id" in r);
  if (typeof r.method !== "string" || (r.params !== undefined && !Array.isArray(r.params))) {
    return errorBody(id, -32600, "invalid request");
  }
  try {
    const result = await request({ method: r.method, params: r.params as unknown[] | undefined });
    return notification ? undefined : { jsonrpc: "2.0", id, result: result ?? null };
  } catch (err) {
    return notification ? undefined : toErrorBody(id, err);
  }
}

async function answerText(request: Request, text: string): Promise<object | undefined> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return errorBody(null, -32700, "parse error");
  }
  if (!Array.isArray(parsed)) return answer(request, parsed);
  if (parsed.length === 0) return errorBody(null, -32600, "invalid request: empty batch");
  const answers = (await Promise.all(parsed.map((one) => answer(request, one)))).filter((a) => a !== undefined);
  return answers.length === 0 ? undefined : answers;
}

interface Conn {
  splitter: JsonSplitter;
  /** Per connection: a character may be split between two packets. */
  decoder: TextDecoder;
  /** Bytes the kernel did not take yet; sent on drain. */
  backlog: Uint8Array[];
  closed: boolean;
}

const encoder = new TextEncoder();

function send(socket: Socket<Conn>, body: object) {
  const conn = socket.data;
  if (conn.closed) return;
  const bytes = encoder.encode(`${JSON.stringify(body)}\n`);
  if (conn.backlog.length > 0) {
    conn.backlog.push(bytes);
    return;
  }
  const written = socket.write(bytes);
  if (written < bytes.length) conn.backlog.push(bytes.subarray(Math.max(0, written)));
}

function flush(socket: Socket<Conn>) {
  const conn = socket.data;
  while (conn.backlog.length > 0) {
    const next = conn.backlog[0]!;
    const written = socket.write(next);
    if (written < next.length) {
      conn.backlog[0] = next.subarray(Math.max(0, written));
      return;
    }
    conn.backlog.shift();
  }
}

function removeStale(path: string) {
  let stat;
  try {
    stat = lstatSync(path);
  } catch {
    return;
  }
  if (!stat.isSocket()) throw new Error(`${path} exists and is not a socket; not removing it`);
  unlinkSync(path);
}

export async function serveJsonRpcSocket(path: string, request: Request): Promise<{ close(): Promise<void> }> {
  removeStale(path);
  // The socket is created with the process umask; 077 around the (synchronous) bind leaves no
  // moment in which it is open to others, and the chmod below states it plainly.
  const umask = process.umask(0o177);
  let server: ReturnType<typeof Bun.listen<Conn>>;
  try {
    server = Bun.listen<Conn>({
      unix: path,
      socket: {
        open(socket) {
          socket.data = { splitter: new JsonSplitter(), decoder: new TextDecoder(), backlog: [], closed: false };
        },
        data(socket, chunk) {
          const conn = socket.data;
          let values: string[];
          try {
            values = conn.splitter.push(conn.decoder.decode(chunk, { stream: true }));
          } catch {
            send(socket, errorBody(null, -32700, "parse error"));
            socket.end();
            return;
          }
          if (conn.splitter.pending > MAX_PENDING_BYTES) {
            send(socket, errorBody(null, -32600, "request too large"));
            socket.end();
            return;
          }
          for (const text of values) {
            void answerText(request, text).then((body) => {
              if (body !== undefined) send(socket, body);
            });
          }
        },
        drain(socket) {
          flush(socket);
        },
        close(socket) {
          socket.data.closed = true;
        },
        error(socket) {
          socket.data.closed = true;
        },
      },
    });
  } finally {
    process.umask(umask);
  }
  chmodSync(path, 0o600);
  return {
    async close() {
      server.stop(true);
      try {
        unlinkSync(path);
      } catch {
        // already gone
      }
    },
  };
}
