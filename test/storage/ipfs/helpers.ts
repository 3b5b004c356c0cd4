/** Shared by the ipfs back-end tests: a back-end over a temp data dir, and byte helpers. */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { openDatabase, type OpenDatabase } from "../../../src/db/open.ts";
import { silentLogger, type Logger } from "../../../src/log.ts";
import { openIpfs, type IpfsBackend } from "../../../src/storage/ipfs/index.ts";
import { tempDir } from "../../support/tmp.ts";

export const MiB = 1_048_576;
export const LOCAL = ["/ip4/127.0.0.1/tcp/0"];

export interface Opened {
  ipfs: IpfsBackend;
  database: OpenDatabase;
  dataDir: string;
  close(): Promise<void>;
}

/** Opens (or reopens) the back-end of `dataDir`, with its own SQLite file there. */
export async function openBackend(dataDir = tempDir("ipfs"), opts: { allowPeers?: string[]; log?: Logger; gcAfterBytes?: number } = {}): Promise<Opened> {
  const database = openDatabase(join(dataDir, "stowage.db"));
  const ipfs = await openIpfs({ dir: join(dataDir, "ipfs"), listen: LOCAL, db: database.db, log: opts.log ?? silentLogger, allowPeers: opts.allowPeers, gcAfterBytes: opts.gcAfterBytes });
  return {
    ipfs,
    database,
    dataDir,
    async close() {
      await ipfs.stop();
      database.close();
    },
  };
}

/** Random bytes (getRandomValues fills at most 64 KiB per call). */
export function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i += 65_536) crypto.getRandomValues(out.subarray(i, Math.min(n, i + 65_536)));
  return out;
}

/** A stream of `bytes` in pieces of `piece` bytes (uneven on purpose: chunking must not care). */
export function streamOf(bytes: Uint8Array, piece = 100_000): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= bytes.byteLength) return c.close();
      c.enqueue(bytes.slice(at, at + piece));
      at += piece;
    },
  });
}

export async function collect(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

export function sha256(bytes: Uint8Array): string {
  return new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
}

/** Block files (`*.data`) under the back-end's blockstore; with `all`, temporaries too. */
export function blockFiles(dataDir: string, opts: { all?: boolean } = {}): string[] {
  const root = join(dataDir, "ipfs", "blocks");
  return readdirSync(root, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .flatMap((d) => readdirSync(join(root, d.name)).map((f) => join(d.name, f)))
    .filter((f) => opts.all || f.endsWith(".data"));
}

/** Rejects if `p` takes longer than `ms`: a hang must fail the test, not stall the run. */
export function within<T>(ms: number, p: Promise<T>): Promise<T> {
  return Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`still pending after ${ms} ms`)), ms).unref())]);
}
