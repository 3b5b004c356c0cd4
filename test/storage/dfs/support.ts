/** Shared helpers for the dfs tests: a store on a real SQLite file and a real folder, and byte sources. */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { openDatabase, type OpenDatabase } from "../../../src/db/open.ts";
import { silentLogger, type Logger } from "../../../src/log.ts";
import { openDfs, type DfsBackend } from "../../../src/storage/dfs/index.ts";
import { tempDir } from "../../support/tmp.ts";

export const MiB = 1_048_576;

export interface Store {
  dfs: DfsBackend;
  database: OpenDatabase;
  /** The store's folder. */
  dir: string;
  /** The data dir holding the folder and the database. */
  root: string;
  close(): Promise<void>;
}

/** Opens a store; pass `root` again to reopen the same data (as after a restart). */
export async function openStore(root = tempDir("dfs"), log: Logger = silentLogger): Promise<Store> {
  const database = openDatabase(join(root, "stowage.db"));
  const dir = join(root, "dfs");
  const dfs = await openDfs({ dir, db: database.db, log });
  return {
    dfs,
    database,
    dir,
    root,
    async close() {
      await dfs.stop();
      database.close();
    },
  };
}

/** Deterministic bytes (xorshift32), different per seed; no two 1 MiB chunks of one seed alike. */
export function bytesOf(size: number, seed = 1): Uint8Array {
  const out = new Uint8Array(size);
  const words = new Uint32Array(out.buffer, 0, size >>> 2);
  let x = seed * 2654435761 || 1;
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    words[i] = x >>> 0;
  }
  for (let i = words.length * 4; i < size; i++) out[i] = i & 0xff;
  return out;
}

/** A stream of `bytes` in pieces of `piece` bytes (as a request body arrives). */
export function streamOf(bytes: Uint8Array, piece = 64 * 1024): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= bytes.length) return c.close();
      c.enqueue(bytes.slice(at, at + piece));
      at += piece;
    },
  });
}

export async function readAll(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** Chunk files and temporary files now in the store's folder. */
export function filesIn(dir: string): { chunks: string[]; temps: string[] } {
  const chunks: string[] = [];
  const temps: string[] = [];
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    if (entry.name.includes(".tmp-")) temps.push(join(entry.parentPath, entry.name));
    else chunks.push(entry.name);
  }
  return { chunks: chunks.sort(), temps };
}

export function sha256(bytes: Uint8Array): string {
  return new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
}

/** Where the store keeps the chunk with these bytes. */
export function chunkPath(dir: string, chunk: Uint8Array): string {
  const hash = sha256(chunk);
  return join(dir, hash.slice(0, 2), hash.slice(2, 4), hash);
}

/** Row counts of the dfs tables. */
export function rowCounts(store: Store): { objects: number; chunks: number; manifest: number } {
  const n = (table: string) => store.database.sqlite.query<{ n: number }, []>(`SELECT COUNT(*) AS n FROM ${table}`).get()?.n ?? 0;
  return { objects: n("dfs_objects"), chunks: n("dfs_chunks"), manifest: n("dfs_object_chunks") };
}

export function chunkRefs(store: Store, hash: string): number | undefined {
  return store.database.sqlite.query<{ refs: number }, [string]>("SELECT refs FROM dfs_chunks WHERE hash = ?").get(hash)?.refs;
}
