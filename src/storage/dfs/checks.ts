/**
 * D9's verification record, on the local blob store: per chunk, the identity of its file (device,
 * inode, size, mtime, ctime) when its bytes last hashed to the chunk's hash. A read that opens
 * the same file trusts it and reads only the bytes it sends (no hash, no whole-chunk read for a
 * range); any other file — rewritten, truncated, replaced, touched — is hashed before a byte of it
 * goes out, and recorded again ("ok", or "damaged": never served while it stays that file). The
 * scrub (scrub.ts) hashes what has no record and re-hashes every chunk periodically.
 *
 * The trade-off D9 accepts, as Ceph and ZFS scrubs do: damage that leaves the file's metadata as
 * it was (a bit flipped on the medium, a write under the file system) is served until the next
 * scrub pass finds it, at most one scrub period later; from then on it is refused. Anything that
 * writes through the file system moves ctime, which no user can set back, so it is caught at once.
 *
 * S3 has no such identity: chunks there are hashed on every read (read.ts).
 *
 * Records are written in batches (one multi-row statement every FLUSH_MS): a record lost in a
 * crash only costs one more hash, and uploads pay no transaction per chunk for them.
 */
import type { Sql } from "../../db/sql.ts";
import type { LocalBlobFile, LocalBlobStore } from "../../blob/local.ts";
import { isBlobError } from "../../blob/index.ts";
import type { Logger } from "../../log.ts";
import { sha256Hex } from "./chunks.ts";
import { chunkKey } from "./cid.ts";
import { CorruptChunkError } from "./errors.ts";

export type CheckState = "ok" | "damaged";

export interface CheckRecord {
  file: string;
  state: CheckState;
}

/** A manifest position with its chunk's record, if any. */
export interface CheckedChunk {
  idx: number;
  hash: string;
  size: number;
  file: string | null;
  state: CheckState | null;
}

const MANIFEST = `SELECT m.idx, m.hash, m.size, k.file, k.state FROM dfs_object_chunks m LEFT JOIN dfs_chunk_checks k ON k.hash = m.hash
  WHERE m.cid = $1 AND m.idx >= $2 AND m.idx <= $3 ORDER BY m.idx`;
const UPSERT = (n: number) =>
  `INSERT INTO dfs_chunk_checks (hash, file, state, checked_at) VALUES ${Array.from({ length: n }, (_, i) => `($${4 * i + 1}, $${4 * i + 2}, $${4 * i + 3}, $${4 * i + 4})`).join(", ")}
   ON CONFLICT (hash) DO UPDATE SET file = excluded.file, state = excluded.state, checked_at = excluded.checked_at`;

/** Records per statement (4 parameters each). */
const FLUSH_BATCH = 200;
const FLUSH_MS = 200;

export class ChunkChecks {
  /** Records not yet written, newest per hash; reads look here first. */
  private readonly pending = new Map<string, CheckRecord & { at: number }>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private flushing: Promise<void> = Promise.resolve();
  /** Chunks read whole and hashed (reads and scrub), and chunks served on their record alone. */
  readonly counts = { hashed: 0, trusted: 0, damaged: 0 };

  constructor(
    private readonly sql: Sql,
    readonly store: LocalBlobStore,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** Positions `from…to` of `cid`'s manifest with their records (one query for many chunks). */
  async manifest(cid: string, from: number, to: number): Promise<CheckedChunk[]> {
    const rows = await this.sql.all<CheckedChunk>(MANIFEST, [cid, from, to]);
    for (const row of rows) {
      const p = this.pending.get(row.hash);
      if (p) Object.assign(row, { file: p.file, state: p.state });
    }
    return rows;
  }

  /**
   * Bytes `from` (inclusive) to `to` (exclusive) of chunk `hash`, never unchecked ones: served on
   * the record when the file is the one it names, else read whole and hashed first. Into `into`
   * (of length to − from) when given: a body read whole is then one buffer, not parts to join.
   */
  async read(chunk: Pick<CheckedChunk, "hash" | "size" | "file" | "state">, from: number, to: number, into?: Uint8Array): Promise<Uint8Array> {
    const file = await this.open(chunk.hash);
    try {
      const p = this.pending.get(chunk.hash);
      const record = p ?? (chunk.file !== null && chunk.state !== null ? { file: chunk.file, state: chunk.state } : undefined);
      if (record?.file === file.identity && file.size === chunk.size) {
        if (record.state === "damaged") throw new CorruptChunkError(chunk.hash, "found damaged by an earlier check");
        this.counts.trusted++;
        return await file.read(from, to - from, into);
      }
      const bytes = (await this.verify(chunk.hash, chunk.size, file)).subarray(from, to);
      if (!into) return bytes;
      into.set(bytes);
      return into;
    } finally {
      await file.close();
    }
  }

  /** Hashes the chunk's file whole and records the verdict; throws CorruptChunkError when wrong. */
  async check(hash: string, size: number): Promise<void> {
    const file = await this.open(hash);
    try {
      await this.verify(hash, size, file);
    } finally {
      await file.close();
    }
  }

  /** The chunk's bytes were just written from bytes that hashed right (or read back and hashed):
   * records its file as it is now. */
  async wrote(hash: string): Promise<void> {
    // A stat, not an open: this runs for every chunk an upload writes.
    const file = await this.store.identity(chunkKey(hash)).catch(() => undefined);
    if (file !== undefined) this.note(hash, file, "ok"); // else no record: the next read or the scrub hashes it
  }

  /** Writes pending records now (at stop, and in tests). */
  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const run = this.flushing.then(() => this.write());
    this.flushing = run.catch(() => {});
    await run;
  }

  private async open(hash: string): Promise<LocalBlobFile> {
    try {
      return await this.store.openFile(chunkKey(hash));
    } catch (e) {
      if (isBlobError(e, "BlobNotFound")) throw new CorruptChunkError(hash, "object missing");
      throw e;
    }
  }

  private async verify(hash: string, size: number, file: LocalBlobFile): Promise<Uint8Array> {
    this.counts.hashed++;
    if (file.size !== size) {
      this.note(hash, file.identity, "damaged");
      throw new CorruptChunkError(hash, `size ${file.size}, expected ${size}`);
    }
    const bytes = await file.read(0, size);
    if ((await sha256Hex(bytes)) !== hash) {
      this.note(hash, file.identity, "damaged");
      throw new CorruptChunkError(hash, "SHA-256 mismatch");
    }
    this.note(hash, file.identity, "ok");
    return bytes;
  }

  private note(hash: string, file: string, state: CheckState): void {
    if (state === "damaged") this.counts.damaged++;
    this.pending.delete(hash); // re-inserted last: a batch writes the newest verdict
    this.pending.set(hash, { file, state, at: this.now() });
    if (this.pending.size >= FLUSH_BATCH) void this.flush().catch((e) => this.log.warn("dfs: writing verification records failed", { error: String(e) }));
    else if (!this.timer) {
      this.timer = setTimeout(() => void this.flush().catch((e) => this.log.warn("dfs: writing verification records failed", { error: String(e) })), FLUSH_MS);
      this.timer.unref();
    }
  }

  private async write(): Promise<void> {
    const batch = [...this.pending].slice(0, FLUSH_BATCH);
    if (batch.length === 0) return;
    await this.sql.run(UPSERT(batch.length), batch.flatMap(([hash, r]) => [hash, r.file, r.state, r.at]));
    // Only what this batch wrote leaves: a newer verdict noted meanwhile stays pending.
    for (const [hash, r] of batch) if (this.pending.get(hash) === r) this.pending.delete(hash);
    if (this.pending.size > 0) await this.write();
  }
}
