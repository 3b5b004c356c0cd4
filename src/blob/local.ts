/**
 * The blob store on local files: the embedded default (DESIGN.md D15), with the crash safety of
 * today's chunk files. An object appears under its final name only whole and durable: written to
 * a temp name in the same folder, fsync'd, renamed over the final name, the folder fsync'd (the
 * rename itself must survive a power cut). A reader opens the file once, so an overwrite
 * (a rename) never mixes two objects' bytes in one read.
 *
 * Layout: key `a/b/NAME` is the file `ROOT/a/b/XX/YY/NAME`, where XXYY are the first four hex
 * digits of SHA-256(NAME). Cids share their first characters, so the fan-out hashes the name:
 * no folder holds more than a few thousand files even at millions of objects.
 */
import { createHash, randomBytes } from "node:crypto";
import { type FileHandle, link, mkdir, open, readdir, readFile, rename, stat, unlink } from "node:fs/promises";
import { type BigIntStats, closeSync, fstatSync, openSync, read as fsRead } from "node:fs";
import { dirname, join, sep } from "node:path";
import { type BlobBatch, BlobError, type BlobRange, type BlobSource, type BlobStore, checkKey, checkRange, emptyStream, TEMP_MARK } from "./store.ts";

const READ_CHUNK = 256 * 1024;
/** fsyncs a batch runs at once: enough for the file system to fold them into few journal commits. */
const SYNC_CONCURRENCY = 16;

export class LocalBlobStore implements BlobStore {
  readonly kind = "local";
  /** Folders known to exist: nothing removes them while the store runs. */
  private readonly made = new Set<string>();

  constructor(readonly root: string) {}

  pathOf(key: string): string {
    const parts = checkKey(key).split("/");
    const name = parts.pop() as string; // checkKey: at least one segment
    const h = fanOut(name);
    return join(this.root, ...parts, h.slice(0, 2), h.slice(2, 4), name);
  }

  async put(key: string, source: BlobSource): Promise<{ size: number }> {
    const path = this.pathOf(key);
    const dir = dirname(path);
    await this.ensureDir(dir);
    const temp = `${path}${TEMP_MARK}${randomBytes(6).toString("hex")}`;
    const fh = await open(temp, "wx", 0o600).catch(fsFail);
    let isOpen = true;
    let size = 0;
    try {
      if (source instanceof Uint8Array) size = await writeAll(fh, source);
      // A source that fails throws its own error out of this loop: the caller's fault, not ours.
      else for await (const chunk of source) size += await writeAll(fh, chunk);
      await fh.sync().catch(fsFail);
      isOpen = false;
      await fh.close().catch(fsFail);
      await rename(temp, path).catch(fsFail);
    } catch (e) {
      if (isOpen) await fh.close().catch(() => {});
      await unlink(temp).catch(() => {});
      throw e;
    }
    await fsyncDir(dir).catch(fsFail);
    return { size };
  }

  /**
   * Puts made durable together (BlobBatch; an upload's chunks). A new object is written
   * to a temporary name and hard-linked to its key, which fails if the key exists: so only a name
   * that did not exist can point at bytes not yet on the disk. Its fsync then runs behind the
   * writes (at most SYNC_CONCURRENCY at once), and `sync()` waits for them and fsyncs each folder
   * once, where `put` pays a file fsync, a rename and a folder fsync per object, one after the
   * other. (Syncing everything only in `sync()` flushed a whole upload's bytes at once, and the
   * SQLite commits behind it — the event loop — waited: /healthz during a 128 MiB upload answered
   * about twice as slowly as with the syncs behind the writes, at the same throughput.) A key
   * that exists is replaced as `put` does (fsync, rename): a reader, or a manifest committed by
   * another upload meanwhile, never sees its object replaced by bytes a power cut could lose.
   * A crash before `sync()` leaves objects nothing references (the sweep's) and temporary files
   * (removed at start); folders made meanwhile become durable at `sync()` too.
   */
  batch(): BlobBatch {
    const dirs = new Set<string>();
    /** Folders this batch made or met unknown: known (`made`) once `sync()` has made them durable. */
    const fresh = new Set<string>();
    /** fsyncs started behind the writes (each closes its file when done), at most SYNC_CONCURRENCY. */
    const syncing = new Set<Promise<void>>();
    let failure: { error: unknown } | undefined;
    const syncBehind = (fh: FileHandle) => {
      const done: Promise<void> = fh
        .sync()
        .catch((error: unknown) => void (failure ??= { error: asBlobError(error) }))
        .finally(async () => {
          await fh.close().catch(() => {});
          syncing.delete(done);
        });
      syncing.add(done);
    };
    return {
      put: async (key, bytes) => {
        if (failure) throw failure.error;
        // Writes wait for the disk only when it falls SYNC_CONCURRENCY objects behind.
        while (syncing.size >= SYNC_CONCURRENCY) await Promise.race(syncing);
        const path = this.pathOf(key);
        const dir = dirname(path);
        if (!this.made.has(dir)) {
          await this.ensureDir(this.root); // once: the store's own entry, as put makes it
          await mkdir(dir, { recursive: true, mode: 0o700 }).catch(fsFail);
          // Another batch may have made it without a sync yet: its entries up to the root are ours to sync too.
          for (let d = dir; d !== this.root && d !== dirname(d); d = dirname(d)) dirs.add(dirname(d));
          fresh.add(dir);
        }
        const temp = `${path}${TEMP_MARK}${randomBytes(6).toString("hex")}`;
        const fh = await open(temp, "wx", 0o600).catch(fsFail);
        let linked = false;
        try {
          await writeAll(fh, bytes);
          linked = await link(temp, path).then(
            () => true,
            (e) => (errno(e) === "EEXIST" ? false : fsFail(e)),
          );
          if (!linked) {
            await fh.sync().catch(fsFail);
            await rename(temp, path).catch(fsFail);
          }
        } catch (e) {
          await fh.close().catch(() => {});
          await unlink(temp).catch(() => {});
          throw e;
        }
        await unlink(temp).catch(() => {}); // after a link; gone already after a rename
        if (linked) syncBehind(fh);
        else await fh.close().catch(() => {});
        dirs.add(dir);
      },
      sync: async () => {
        while (syncing.size > 0) await Promise.all(syncing);
        if (failure) throw failure.error;
        await eachAtMost(SYNC_CONCURRENCY, dirs, (dir) => fsyncDir(dir).catch(fsFail));
        for (const dir of fresh) this.made.add(dir);
        dirs.clear();
        fresh.clear();
      },
    };
  }

  async bytes(key: string): Promise<Uint8Array> {
    try {
      return await readFile(this.pathOf(key));
    } catch (e) {
      if (errno(e) === "ENOENT") throw new BlobError("BlobNotFound", `no blob ${key}`);
      return fsFail(e);
    }
  }

  async get(key: string, range?: BlobRange): Promise<ReadableStream<Uint8Array>> {
    checkRange(range);
    const fh = await open(this.pathOf(key), "r").catch((e) => {
      if (errno(e) === "ENOENT") throw new BlobError("BlobNotFound", `no blob ${key}`);
      return fsFail(e);
    });
    let size: number;
    try {
      size = (await fh.stat()).size;
    } catch (e) {
      await fh.close().catch(() => {});
      return fsFail(e);
    }
    let pos = Math.min(range?.offset ?? 0, size);
    const end = range?.length === undefined ? size : Math.min(size, pos + range.length);
    if (pos >= end) {
      await fh.close().catch(() => {});
      return emptyStream();
    }
    return new ReadableStream<Uint8Array>({
      async pull(ctl) {
        try {
          const want = Math.min(READ_CHUNK, end - pos);
          const buf = new Uint8Array(want);
          const { bytesRead } = await fh.read(buf, 0, want, pos);
          // Files are replaced by rename, never changed in place: a short read means damage.
          if (bytesRead === 0) throw new BlobError("BlobStoreError", `blob ${key} ended at ${pos} of ${size} bytes`);
          pos += bytesRead;
          ctl.enqueue(bytesRead === want ? buf : buf.subarray(0, bytesRead));
          if (pos >= end) {
            await fh.close();
            ctl.close();
          }
        } catch (e) {
          await fh.close().catch(() => {});
          ctl.error(e instanceof BlobError ? e : asBlobError(e));
        }
      },
      async cancel() {
        await fh.close().catch(() => {});
      },
    });
  }

  /**
   * The object's file, opened, with its identity (D9's verification record; local files only):
   * what it holds stays what was opened, even if a put renames another file over the name
   * meanwhile. The caller closes it. Throws BlobError BlobNotFound.
   *
   * The open, its fstat and the close run on the calling thread: three thread-pool hops per
   * chunk were ≈ 0.4 ms of a 1 MiB ranged GET's wall time. They read only the
   * directory and inode, which stay cached, and where they do not, a miss is one disk read, as a
   * SQLite page not in its cache is for bun:sqlite, which reads on this thread too. The bytes
   * themselves are read in the thread pool: a chunk not in the page cache never holds the loop.
   */
  async openFile(key: string): Promise<LocalBlobFile> {
    let fd: number;
    try {
      fd = openSync(this.pathOf(key), "r");
    } catch (e) {
      if (errno(e) === "ENOENT") throw new BlobError("BlobNotFound", `no blob ${key}`);
      return fsFail(e);
    }
    const close = () => {
      try {
        closeSync(fd);
      } catch {
        // a read-only descriptor: nothing was written that a failed close could lose
      }
    };
    try {
      const st = fstatSync(fd, { bigint: true });
      const size = Number(st.size);
      return {
        identity: identityOf(st),
        size,
        read: async (offset, length, into) => {
          const buf = into ?? Buffer.allocUnsafe(length);
          let done = 0;
          while (done < length) {
            const bytesRead = await readAt(fd, buf, done, length - done, offset + done).catch(fsFail);
            // Files are replaced by rename, never changed in place: a short read means damage.
            if (bytesRead === 0) throw new BlobError("BlobStoreError", `blob ${key} ended at ${offset + done} of ${size} bytes`);
            done += bytesRead;
          }
          return buf;
        },
        close: async () => close(),
      };
    } catch (e) {
      close();
      return fsFail(e);
    }
  }

  /** The identity `openFile` would give the object's file now (one stat, no open); undefined if absent. */
  async identity(key: string): Promise<string | undefined> {
    try {
      return identityOf(await stat(this.pathOf(key), { bigint: true }));
    } catch (e) {
      if (errno(e) === "ENOENT") return undefined;
      return fsFail(e);
    }
  }

  async stat(key: string): Promise<number | undefined> {
    try {
      return (await stat(this.pathOf(key))).size;
    } catch (e) {
      if (errno(e) === "ENOENT") return undefined;
      return fsFail(e);
    }
  }

  /** Not fsync'd: an object a power cut brings back is one no row references, and the next
   * sweep removes it again. */
  async delete(key: string): Promise<void> {
    await unlink(this.pathOf(key)).catch((e) => {
      if (errno(e) !== "ENOENT") fsFail(e);
    });
  }

  async *list(prefix: string): AsyncIterable<string> {
    // Keys under `prefix` live under the folder of its complete segments; the rest of the
    // prefix filters names (a key's own folders may also start with it: "dfs/ba" matches "dfs/bad/x").
    const cut = prefix.lastIndexOf("/");
    const base = cut < 0 ? [] : prefix.slice(0, cut).split("/");
    if (base.some((s) => s === "" || s === "." || s === "..")) return;
    yield* walk(join(this.root, ...base), base, prefix);
  }

  /** Removes half-written files a crash left (`NAME.tmp-RANDOM`). Only while nothing writes: at open, under
   * the data dir's lock. Returns how many went. */
  async removeLeftoverTemps(): Promise<number> {
    let removed = 0;
    const visit = async (dir: string): Promise<void> => {
      const entries = await readdir(dir, { withFileTypes: true }).catch((e) => (errno(e) === "ENOENT" ? [] : fsFail(e)));
      for (const entry of entries) {
        const path = `${dir}${sep}${entry.name}`;
        if (entry.isDirectory()) await visit(path);
        else if (entry.name.includes(TEMP_MARK)) {
          await unlink(path).catch((e) => (errno(e) === "ENOENT" ? undefined : fsFail(e)));
          removed++;
        }
      }
    };
    await visit(this.root);
    return removed;
  }

  private async ensureDir(dir: string): Promise<void> {
    if (this.made.has(dir)) return;
    const first = await mkdir(dir, { recursive: true, mode: 0o700 }).catch(fsFail);
    // Each new folder's entry is in its parent: make those durable too, once per folder.
    if (first !== undefined) {
      for (let d = dirname(dir); ; d = dirname(d)) {
        await fsyncDir(d).catch(fsFail);
        if (d === dirname(first) || d === dirname(d)) break;
      }
    }
    this.made.add(dir);
  }
}

/** An opened object of the local store (see `openFile`). */
export interface LocalBlobFile {
  /** Device, inode, size, mtime and ctime (ns) as one string: any write, truncation, rename over
   * the name or `touch` (even one that sets the old mtime back: ctime moves) changes it. */
  identity: string;
  size: number;
  /** `length` bytes from `offset` (which must lie inside the file), into `into` (of that length) when given. */
  read(offset: number, length: number, into?: Uint8Array): Promise<Uint8Array>;
  close(): Promise<void>;
}

/** pread in the thread pool: the bytes read into `buf` at `at`. */
function readAt(fd: number, buf: Uint8Array, at: number, length: number, position: number): Promise<number> {
  return new Promise((resolve, reject) => fsRead(fd, buf, at, length, position, (err, n) => (err ? reject(err) : resolve(n))));
}

/** The identity `openFile` gives, for a file's stat (tests use it to play a change no metadata shows). */
export function identityOf(st: BigIntStats): string {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
}

function fanOut(name: string): string {
  return createHash("sha256").update(name).digest("hex");
}

/** Every key in the folder `dir` (whose key segments are `segs`) that starts with `prefix`. A
 * file is a key only at `…/XX/YY/NAME` with XXYY its name's hash: anything else is not ours. */
async function* walk(dir: string, segs: string[], prefix: string): AsyncGenerator<string> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (e) {
    if (errno(e) === "ENOENT" || errno(e) === "ENOTDIR") return;
    return fsFail(e);
  }
  for (const entry of entries) {
    const path = `${dir}${sep}${entry.name}`;
    if (entry.isDirectory()) {
      yield* walk(path, [...segs, entry.name], prefix);
      continue;
    }
    if (!entry.isFile() || entry.name.includes(TEMP_MARK) || segs.length < 2) continue;
    const h = fanOut(entry.name);
    if (segs[segs.length - 2] !== h.slice(0, 2) || segs[segs.length - 1] !== h.slice(2, 4)) continue;
    const key = [...segs.slice(0, -2), entry.name].join("/");
    if (key.startsWith(prefix)) yield key;
  }
}

async function writeAll(fh: FileHandle, bytes: Uint8Array): Promise<number> {
  for (let done = 0; done < bytes.length; ) {
    const { bytesWritten } = await fh.write(bytes, done, bytes.length - done).catch(fsFail);
    done += bytesWritten;
  }
  return bytes.length;
}

/** Runs `fn` over `items`, at most `n` at a time; rejects with the first failure once all have settled. */
async function eachAtMost<T>(n: number, items: Iterable<T>, fn: (item: T) => Promise<unknown>): Promise<void> {
  const todo = [...items];
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async () => {
    while (next < todo.length) {
      const item = todo[next++] as T;
      await fn(item).catch((error: unknown) => void (failure ??= { error }));
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, todo.length) }, worker));
  if (failure) throw failure.error;
}

/** Makes a folder's entries (a rename) durable. */
export async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

function errno(e: unknown): string | undefined {
  return typeof e === "object" && e !== null && "code" in e && typeof e.code === "string" ? e.code : undefined;
}

const UNAVAILABLE = new Set(["ENOSPC", "EDQUOT", "EIO", "EROFS", "EMFILE", "ENFILE", "EAGAIN"]);
const DENIED = new Set(["EACCES", "EPERM"]);

function asBlobError(e: unknown): BlobError {
  if (e instanceof BlobError) return e;
  const code = errno(e);
  const message = `local blob store: ${(e as Error)?.message ?? String(e)}`;
  if (code && UNAVAILABLE.has(code)) return new BlobError("BlobStoreUnavailable", message, { cause: e });
  if (code && DENIED.has(code)) return new BlobError("BlobAccessDenied", message, { cause: e });
  return new BlobError("BlobStoreError", message, { cause: e });
}

function fsFail(e: unknown): never {
  throw asBlobError(e);
}
