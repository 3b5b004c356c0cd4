/**
 * The compiled binary on its socket (spec row 5, D14): downloads over one chunk carry
 * Content-Length on 200 and 206, never chunked, on both back-ends, and HEAD tells the same length.
 * The SDK drives it (login, vouchers); its GETs and HEADs go over a raw socket to see the framing.
 */
import { afterAll, expect, test } from "bun:test";
import { join } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { runBinary, startBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";
import { wireFetch, type Wire } from "../support/wire.ts";

const MiB = 1024 * 1024;
const dataDir = join(tempDir("e2e-length"), "data");
const server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir]);
afterAll(() => server.stop());

test("200, 206 and HEAD of a 3 MiB + 1 download carry its Content-Length on dfs and ipfs", async () => {
  const account = privateKeyToAccount(generatePrivateKey());
  const seen: Wire[] = [];
  const store = await connectStorage({ baseUrl: server.url, account, fetch: wireFetch(seen) });
  await store.login();
  for (const pool of [["--space", "20MB"], ["--traffic", "100MB"]]) {
    const grant = await runBinary(["admin", "grant", "--did", store.did, ...pool, "--data-dir", dataDir]);
    expect(grant.code, grant.stderr).toBe(0);
  }
  const size = 3 * MiB + 1;
  const bytes = new Uint8Array(size).map((_, i) => (i * 13) % 253);
  for (const kind of ["dfs", "ipfs"] as const) {
    const { Cid } = await store.upload(kind, bytes, { name: "three.bin" });
    const answers = async (call: () => Promise<Response>) => {
      const from = seen.length;
      const res = await call();
      const body = new Uint8Array(await res.arrayBuffer());
      const wire = seen.slice(from).pop() as Wire;
      expect(wire.headers.get("transfer-encoding")).toBeUndefined();
      return { wire, body };
    };
    const whole = await answers(() => store.download(kind, Cid, { size }));
    expect(whole.wire.status).toBe(200);
    expect(whole.wire.headers.get("content-length")).toBe(String(size));
    expect(whole.body).toEqual(bytes);

    const part = await answers(() => store.download(kind, Cid, { range: [MiB - 3, 3 * MiB] }));
    expect(part.wire.status).toBe(206);
    expect(part.wire.headers.get("content-length")).toBe(String(2 * MiB + 4));
    expect(part.body).toEqual(bytes.slice(MiB - 3, 3 * MiB + 1));

    const head = await answers(() => store.download(kind, Cid, { method: "HEAD", size: 0 }));
    expect(head.wire.status).toBe(200);
    expect(head.wire.headers.get("content-length")).toBe(String(size));
    expect(head.wire.body.byteLength).toBe(0);
  }
}, 60_000);
