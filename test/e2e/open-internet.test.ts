/**
 * The compiled binary as attackers on the open internet met it, and as real clients must still
 * find it: a short Host header (a gateway reached as `http://api/` behind a proxy), request bodies
 * that trickle in a byte at a time on both ports (cut) next to slow but steady uploads (kept), and
 * the quota holds of a process killed with SIGKILL mid-upload (cleared when it starts again).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { statSync } from "node:fs";
import { join } from "node:path";
import { Sha256 } from "@aws-crypto/sha256-js";
import { SignatureV4 } from "@smithy/signature-v4";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { keysClient } from "../../src/sdk/keys.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { freePort } from "../support/procs.ts";
import { tempDir } from "../support/tmp.ts";
import { until } from "../support/until.ts";

const KiB = 1024;
const MiB = 1024 * KiB;
/** The idle limit both listeners cut silent sockets at, which the minimum body rate is counted over. */
const IDLE_S = 10;

/** What came back on a raw connection: the status line (or "closed" when the server closed it
 * without answering), when it ended, and whether it ended at all within the wait. */
interface Exchange {
  answer: string;
  ms: number;
}

/**
 * Sends `head` on a connection of its own, then `total` body bytes in pieces of `piece`, one every
 * `everyMs`; resolves once the server answers and closes, or closes without an answer, or after
 * `giveUpMs` (answer "still open"): a test that fails never waits for ever.
 */
async function exchange(url: string, head: string, o: { total: number; piece: number; everyMs: number; giveUpMs: number }): Promise<Exchange> {
  const { hostname, port } = new URL(url);
  let answer = "";
  let closed!: () => void;
  const ended = new Promise<"ended">((resolve) => (closed = () => resolve("ended")));
  const socket = await Bun.connect({
    hostname,
    port: Number(port),
    socket: { data: (_, d) => void (answer += Buffer.from(d).toString("latin1")), close: () => closed(), error: () => closed() },
  });
  const began = performance.now();
  socket.write(head);
  let gone = false;
  void ended.then(() => (gone = true));
  const body = (async () => {
    for (let sent = 0; sent < o.total && !gone; sent += o.piece) {
      socket.write(new Uint8Array(Math.min(o.piece, o.total - sent)).fill(0x61));
      await Promise.race([Bun.sleep(o.everyMs), ended]);
    }
  })();
  const outcome = await Promise.race([ended, Bun.sleep(o.giveUpMs).then(() => "still open" as const)]);
  const ms = performance.now() - began;
  if (outcome === "still open") {
    gone = true;
    socket.end();
    await body;
    return { answer: "still open", ms };
  }
  await body;
  return { answer: answer.split("\r\n")[0] || "closed", ms };
}

/** The head of a PutObject signed with `key` for a body sent as it comes (UNSIGNED-PAYLOAD). */
async function putObjectHead(endpoint: string, key: { accessKeyId: string; secretAccessKey: string }, path: string, length: number): Promise<string> {
  const url = new URL(path, endpoint);
  const signer = new SignatureV4({ service: "s3", region: "us-east-1", credentials: key, sha256: Sha256, uriEscapePath: false });
  const req = await signer.sign({
    method: "PUT",
    protocol: "http:",
    hostname: url.hostname,
    port: Number(url.port),
    path: url.pathname,
    query: {},
    headers: { host: url.host, "x-amz-content-sha256": "UNSIGNED-PAYLOAD", "content-length": String(length) },
  });
  const lines = Object.entries(req.headers).map(([k, v]) => `${k}: ${v}`);
  return `PUT ${url.pathname} HTTP/1.1\r\n${lines.join("\r\n")}\r\nConnection: close\r\n\r\n`;
}

/** A fetch whose upload bodies go out `rate` bytes a second (in pieces of a tenth of it), or stop
 * for good after `stopAfter` bytes (`reached` resolves then): a slow client, or one that dies. */
function pacedFetch(o: { rate?: number; stopAfter?: number; reached?: () => void }): typeof fetch {
  return ((input: string | URL | Request, init?: RequestInit) => {
    if (!(init?.body instanceof ReadableStream)) return fetch(input, init);
    const reader = init.body.getReader();
    let pending: Uint8Array | undefined;
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (o.stopAfter !== undefined && sent >= o.stopAfter) {
          o.reached?.();
          return new Promise<void>(() => {}); // never more
        }
        let bytes: Uint8Array;
        if (pending?.byteLength) bytes = pending;
        else {
          const next = await reader.read();
          if (next.done) return controller.close();
          bytes = next.value;
        }
        const piece = o.rate ? Math.max(1, Math.floor(o.rate / 10)) : bytes.byteLength;
        if (o.rate) await Bun.sleep(100);
        controller.enqueue(bytes.subarray(0, piece));
        sent += Math.min(piece, bytes.byteLength);
        pending = bytes.subarray(piece);
      },
    });
    return fetch(input, { ...init, body, duplex: "half" } as RequestInit);
  }) as typeof fetch;
}

/** A new account with space and traffic granted by the operator's command line, logged in. */
async function account(server: RunningBinary, dataDir: string, space: string, traffic: string) {
  const signer = privateKeyToAccount(generatePrivateKey());
  const store = await connectStorage({ baseUrl: server.url, account: signer });
  await store.login();
  for (const [flag, bytes] of [["--space", space], ["--traffic", traffic]] as const) {
    const grant = await runBinary(["admin", "grant", "--did", store.did, flag, bytes, "--data-dir", dataDir]);
    expect(grant.code, grant.stderr).toBe(0);
  }
  // The gateway reads quota records at most 1 s old.
  await until("the grants", async () => [(await store.space()).SizeByte, (await store.traffic()).SizeByte], (v) => v.every((n) => n > 0), 5000, 100);
  return { signer, store };
}

describe("one gateway, both ports", () => {
  const dataDir = join(tempDir("e2e-open-internet"), "data");
  let server: RunningBinary;
  let s3Endpoint: string;
  beforeAll(async () => {
    server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir], { STOWAGE_S3_API_PORT: String(freePort()) });
    s3Endpoint = /stowage S3 API listening on (http:\/\/\S+)/.exec(server.output())?.[1] as string;
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  test("the main port answers /healthz and its routes behind any valid Host: x, gw, api, gw:80", async () => {
    for (const host of ["x", "gw", "api", "gw:80", "[::1]", "gateway.example.com"]) {
      const health = await exchange(server.url, `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, { total: 0, piece: 1, everyMs: 1, giveUpMs: 5000 });
      const info = await exchange(server.url, `GET /chain HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, { total: 0, piece: 1, everyMs: 1, giveUpMs: 5000 });
      expect({ host, health: health.answer, info: info.answer }).toEqual({ host, health: "HTTP/1.1 200 OK", info: "HTTP/1.1 200 OK" });
    }
  }, 60_000);

  // 500 such sockets stayed open on each port: one sent a byte every few seconds, never silent
  // for the idle limit. A body must keep the minimum rate (1 KiB/s by default) over each 10 s the
  // server waits for it; an upload at a real rate may take as long as it takes.
  test("a body sent a byte every 2 s is cut within the idle limit on both ports; a slow, steady upload completes on both", async () => {
    const { signer, store } = await account(server, dataDir, "64MiB", "64MiB");
    const key = await keysClient({ baseUrl: server.url, store }).create();
    const trickle = { total: 1000, piece: 1, everyMs: 2000, giveUpMs: 3 * IDLE_S * 1000 };
    // 2 KiB/s, twice the minimum, for 22 s: more than two windows of the rate.
    const steadyBytes = 44 * KiB;
    const slow = await connectStorage({ baseUrl: server.url, account: signer, fetch: pacedFetch({ rate: 2 * KiB }) });
    await slow.login();
    const began = performance.now();
    const [mainTrickle, s3Trickle, s3Steady, mainSteady] = await Promise.all([
      // A login body: read by the storage API as soon as it comes.
      exchange(server.url, `POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${trickle.total}\r\nConnection: close\r\n\r\n`, trickle),
      exchange(s3Endpoint, await putObjectHead(s3Endpoint, key, "/dfs/trickle.bin", trickle.total), trickle),
      exchange(s3Endpoint, await putObjectHead(s3Endpoint, key, "/dfs/steady.bin", steadyBytes), { total: steadyBytes, piece: 205, everyMs: 100, giveUpMs: 120_000 }),
      slow.upload("dfs", crypto.getRandomValues(new Uint8Array(steadyBytes)), { name: "steady-main.bin" }).then(
        (entry) => ({ answer: `stored ${entry.Size}`, ms: performance.now() - began }),
        (err: Error) => ({ answer: `failed: ${err.message}`, ms: performance.now() - began }),
      ),
    ]);
    for (const [port, cut] of [["main", mainTrickle], ["s3", s3Trickle]] as const) {
      expect({ port, answer: cut.answer }).toEqual({ port, answer: "closed" });
      // Cut once 10 s of waiting brought less than the minimum: not before, and well within the limit.
      expect(cut.ms).toBeGreaterThan((IDLE_S - 1) * 1000);
      expect(cut.ms).toBeLessThan((IDLE_S + 4) * 1000);
    }
    expect(s3Steady.answer).toBe("HTTP/1.1 200 OK");
    expect(s3Steady.ms).toBeGreaterThan(2 * IDLE_S * 1000);
    expect(mainSteady.answer).toBe(`stored ${steadyBytes}`);
    expect(mainSteady.ms).toBeGreaterThan(2 * IDLE_S * 1000);
    // Both stored whole; the trickled object is not.
    expect((await store.list("dfs")).Object.map((o) => [o.Name, o.Size]).sort()).toEqual([
      ["steady-main.bin", steadyBytes],
      ["steady.bin", steadyBytes],
    ]);
  }, 120_000);
});

// A gateway killed mid-upload left holds under its id that kept the account "full" for the
// holds' 60 s lifetime after it came back. Started again on its data dir, it has the same id and
// clears them before it serves anything.
test("kill -9 mid-upload, start again: the account's space is free at once", async () => {
  const dataDir = join(tempDir("e2e-holds"), "data");
  const args = ["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir];
  const first = await startBinary(args);
  let second: RunningBinary | undefined;
  try {
    const { signer, store } = await account(first, dataDir, "24MiB", "100MiB");
    const space = (await store.space()).SizeByte;
    expect(space).toBe(24 * MiB);
    // anvil saves the chain's state every 2 s: the grants must be in a save before the kill (the
    // in-process engine writes each change through at once).
    const state = join(dataDir, "chain", "state.json");
    const grantedAt = Date.now();
    await until("a save of the chain's state", () => { try { return statSync(state).mtimeMs; } catch { return Number.POSITIVE_INFINITY; } }, (t) => t > grantedAt, 10_000, 50);

    // An upload of 20 MiB that stops after 10 MiB: past 8 MiB it holds what it received.
    let reached!: () => void;
    const halfway = new Promise<void>((ok) => (reached = ok));
    const dying = await connectStorage({ baseUrl: first.url, account: signer, fetch: pacedFetch({ stopAfter: 10 * MiB, reached }) });
    await dying.login();
    const upload = dying.upload("dfs", crypto.getRandomValues(new Uint8Array(20 * MiB)), { name: "cut.bin" }).then(
      () => "stored",
      () => "failed",
    );
    await halfway;
    const held = await until("the upload's hold", async () => (await store.space()).SizeByte, (left) => left < space, 10_000, 50);
    expect(held).toBeLessThanOrEqual(space - 8 * MiB);
    expect(await first.stop("SIGKILL")).not.toBe(0);
    expect(await upload).toBe("failed");

    second = await startBinary(args);
    const again = await connectStorage({ baseUrl: second.url, account: signer });
    await again.login();
    // At once: no hold of the dead process counts, and a 20 MiB upload fits.
    expect((await again.space()).SizeByte).toBe(space);
    expect(second.output()).toContain("cleared the quota holds of this gateway's previous process");
    const whole = await again.upload("dfs", crypto.getRandomValues(new Uint8Array(20 * MiB)), { name: "whole.bin" });
    expect(whole.Size).toBe(20 * MiB);
    expect((await again.list("dfs")).Object.map((o) => o.Name)).toEqual(["whole.bin"]);
  } finally {
    await second?.stop();
    if (first.proc.exitCode === null) await first.stop("SIGKILL");
  }
}, 120_000);
