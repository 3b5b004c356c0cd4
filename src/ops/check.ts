/**
 * `stowage admin check`: whether the rows and the blobs agree, in any configuration (SQLite or
 * PostgreSQL, local files or S3), on a running gateway or a restored one. It reports; it repairs
 * only when asked, and only what is safe to set right:
 *
 * - every file's content row exists and has the file's size; a dfs object's manifest has the rows,
 *   bytes and Cid its row says (the Cid rebuilt from the chunk hashes, D9); an ipfs root's DAG, walked
 *   from the blob store, is the block index its row has, and has the file's size (a folder's, as a
 *   CAR import sizes it: the bytes of its DAG's blocks, each counted once);
 * - every chunk and block a row keeps exists in the blob store with its size, and hashes to its key;
 * - counts agree with the rows they count: a chunk's or block's references (repairable at any time:
 *   they change with their rows, under a row lock), an object's manifest rows (likewise), an
 *   account's stored bytes (`stored_totals`, kept by triggers: likewise), and a content row's
 *   references against its holders, file rows and S3 parts. The last change in transactions of
 *   their own (a file replaced, then its old content released), so a running gateway shows them
 *   apart for a moment: a difference is looked at again after `settleMs`, and is repaired only
 *   with no gateway running (`offline`), since a release in flight would otherwise count twice.
 *
 * Reads are paged, in constant memory; what it reads of each capability's tables it reads
 * through that capability's own functions (one owner per table).
 *
 * @example
 *   const report = await runCheck({ sql, store, hash: true, repair: false, offline: false })
 *   report.ok // no finding left unrepaired
 */
import * as dagPb from "@ipld/dag-pb";
import { UnixFS } from "ipfs-unixfs";
import { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import type { BlobStore } from "../blob/store.ts";
import type { Sql } from "../db/sql.ts";
import { rawLeaf, rootOf } from "../cid/tree.ts";
import type { BackendKind } from "../storage/backend.ts";
import { MAX_CHILDREN_PER_NODE } from "../storage/cid-options.ts";
import { contentHolders, filesUsing, filesWithoutContent, recountStoredTotal, storedTotalsDrift } from "../storage/audit.ts";
import { chunkRefDrift, chunkTotals, keptChunks, manifestOf, objectShapes, recountChunk, recountObjectChunks } from "../storage/dfs/audit.ts";
import { blockRefDrift, blockSizes, blockTotals, indexGaps, indexOf, keptBlocks, pinShapes, recountBlock } from "../storage/ipfs/audit.ts";
import { blockKey, inlineBlock } from "../storage/ipfs/blocks.ts";
import { contentProblem } from "./blob-content.ts";
import { contentDrift, driftOf, setToHolders } from "./references.ts";

export type CheckArea = "files" | "references" | "manifests" | "blobs" | "stored";

export interface Finding {
  area: CheckArea;
  /** What is wrong: a file, a chunk, a block, an account. */
  subject: string;
  message: string;
  /** Set right by this run (--repair). */
  repaired?: boolean;
}

export interface CheckReport {
  ok: boolean;
  findings: Finding[];
  /** Findings past the ones kept (MAX_FINDINGS). */
  more: number;
  repaired: number;
  counts: { files: number; dfsObjects: number; dfsChunks: number; ipfsRoots: number; ipfsBlocks: number; blobsChecked: number; bytesHashed: number };
  seconds: number;
}

export interface CheckOptions {
  sql: Sql;
  store: BlobStore;
  /** Hash every blob (default); false: existence and size only. */
  hash?: boolean;
  repair?: boolean;
  /** No gateway runs on the database: reference counts against holders may be repaired too. */
  offline?: boolean;
  /** How long a count that differs from its holders is given to settle before it is reported. */
  settleMs?: number;
  /** Blobs read at once (default 8). */
  concurrency?: number;
  progress?: (p: { area: CheckArea; done: number; total?: number }) => void;
}

const MAX_FINDINGS = 1000;

export async function runCheck(o: CheckOptions): Promise<CheckReport> {
  const started = performance.now();
  const { sql, store } = o;
  const findings: Finding[] = [];
  let more = 0;
  let unrepaired = 0;
  let repaired = 0;
  const counts = { files: 0, dfsObjects: 0, dfsChunks: 0, ipfsRoots: 0, ipfsBlocks: 0, blobsChecked: 0, bytesHashed: 0 };
  const progress = o.progress ?? (() => {});
  const add = (f: Finding) => {
    if (f.repaired) repaired++;
    else unrepaired++;
    if (findings.length < MAX_FINDINGS) findings.push(f);
    else more++;
  };
  /** Runs a repair when asked; the finding says whether it happened. */
  const fix = async (f: Omit<Finding, "repaired">, safe: boolean, repair: () => Promise<unknown>) => {
    if (o.repair && safe) {
      await repair();
      add({ ...f, repaired: true });
    } else add(f);
  };
  const affected = async (what: Parameters<typeof filesUsing>[1]) => {
    const files = await filesUsing(sql, what);
    return files.length ? ` (files: ${files.map((f) => `${f.id} "${f.name}" of ${f.did}`).join(", ")})` : "";
  };

  // Files and their content rows.
  progress({ area: "files", done: 0 });
  for (const backend of ["dfs", "ipfs"] as const) {
    for await (const f of filesWithoutContent(sql, backend)) {
      add({ area: "files", subject: `${backend} file ${f.id} "${f.name}" of ${f.did}`, message: f.contentSize === null ? `its content ${f.cid} has no row: it cannot be read` : `${f.size} bytes, its content ${f.cid} has ${f.contentSize}` });
    }
  }

  // Content rows' references against their holders (file rows and S3 parts).
  progress({ area: "references", done: 0 });
  for (const backend of ["dfs", "ipfs"] as const) {
    for await (const c of contentHolders(sql, backend)) {
      if (backend === "dfs") counts.dfsObjects++;
      else counts.ipfsRoots++;
      counts.files += c.files;
    }
  }
  const suspects = await contentDrift(sql);
  if (suspects.length > 0 && (o.settleMs ?? 0) > 0) await Bun.sleep(o.settleMs as number);
  for (const s of suspects) {
    const now = await driftOf(sql, s.backend, s.cid);
    if (!now || now.refs === now.holders) continue; // released, or settled, meanwhile
    const subject = `${s.backend} content ${s.cid}`;
    const message =
      now.refs < now.holders
        ? `${now.refs} references, ${now.holders} holders: releasing them would delete content still in use`
        : `${now.refs} references, ${now.holders} holders: it would never be freed`;
    await fix({ area: "references", subject, message: message + (await affected({ backend: s.backend, cid: s.cid })) }, o.offline === true, () => setToHolders(sql, now));
  }

  // dfs manifests: rows, bytes, Cid; chunks' references.
  progress({ area: "manifests", done: 0 });
  for await (const obj of objectShapes(sql)) {
    const subject = `dfs content ${obj.cid}`;
    if (obj.chunks !== obj.manifestRows) await fix({ area: "manifests", subject, message: `its row counts ${obj.chunks} chunks, its manifest has ${obj.manifestRows}` }, true, () => recountObjectChunks(sql, obj.cid));
    if (obj.size !== obj.manifestBytes) add({ area: "manifests", subject, message: `${obj.size} bytes, its manifest's chunks hold ${obj.manifestBytes}${await affected({ backend: "dfs", cid: obj.cid })}` });
    const manifest = await manifestOf(sql, obj.cid);
    if (manifest.length > 0) {
      const built = rootOf(manifest.map((c) => rawLeaf(Buffer.from(c.hash, "hex"), c.size)), MAX_CHILDREN_PER_NODE).toString();
      if (built !== obj.cid) add({ area: "manifests", subject, message: `its manifest makes the Cid ${built}${await affected({ backend: "dfs", cid: obj.cid })}` });
    }
  }
  for await (const c of chunkRefDrift(sql)) {
    await fix({ area: "references", subject: `dfs chunk ${c.hash}`, message: `${c.refs} references, ${c.actual} manifests name it` }, true, () => recountChunk(sql, c.hash));
  }

  // ipfs roots: each DAG against its index and size; blocks' references.
  for await (const pin of pinShapes(sql)) {
    const subject = `ipfs content ${pin.cid}`;
    if (pin.indexed === 0) {
      add({ area: "manifests", subject, message: "its blocks are not indexed (a start of the server indexes them)" });
      continue;
    }
    const dag = await walkDag(store, pin.cid);
    if (dag.problem) {
      add({ area: "manifests", subject, message: `${dag.problem}${await affected({ backend: "ipfs", cid: pin.cid })}` });
      continue;
    }
    if (dag.directory) {
      const held = await dagBytes(sql, store, dag.keys);
      if (held !== undefined && held !== pin.size) add({ area: "manifests", subject, message: `its row says ${pin.size} bytes, its folder's blocks hold ${held}` });
    } else if (dag.fileSize !== pin.size) add({ area: "manifests", subject, message: `its row says ${pin.size} bytes, its DAG holds ${dag.fileSize}` });
    const index = await indexOf(sql, pin.cid);
    const unindexed = [...dag.keys.keys()].filter((k) => !index.has(k));
    const extra = [...index].filter((k) => !dag.keys.has(k));
    if (unindexed.length) add({ area: "manifests", subject, message: `${unindexed.length} blocks of its DAG are not in its index (${unindexed[0]}…): a sweep could delete them` });
    if (extra.length) add({ area: "manifests", subject, message: `${extra.length} blocks in its index are not in its DAG (${extra[0]}…)` });
  }
  for await (const b of blockRefDrift(sql)) {
    await fix({ area: "references", subject: `ipfs block ${b.key}`, message: `${b.refs} references, ${b.actual} roots hold it` }, true, () => recountBlock(sql, b.key));
  }
  const gaps = await indexGaps(sql);
  for (const g of gaps.unkept) add({ area: "references", subject: `ipfs block ${g.key}`, message: `the index of ${g.cid} lists it but no row keeps it: a sweep could delete it` });
  if (gaps.orphans > 0) add({ area: "references", subject: "ipfs block index", message: `${gaps.orphans} index rows name roots that are not pinned` });

  // Blobs: each kept chunk and block exists, with its size, and hashes to its key.
  const total = await countKept(sql);
  let done = 0;
  const check = async (key: string, size: number, what: Parameters<typeof filesUsing>[1]) => {
    let problem: string | undefined;
    if (o.hash === false) {
      const found = await store.stat(key);
      problem = found === undefined ? "missing from the blob store" : found !== size ? `${found} bytes in the blob store, ${size} in its row` : undefined;
    } else {
      const bytes = await store.bytes(key).catch((err: unknown) => ((err as { code?: string }).code === "BlobNotFound" ? undefined : Promise.reject(err)));
      if (bytes === undefined) problem = "missing from the blob store";
      else {
        counts.bytesHashed += bytes.length;
        problem = bytes.length !== size ? `${bytes.length} bytes in the blob store, ${size} in its row` : contentProblem(key, bytes);
      }
    }
    counts.blobsChecked++;
    if (problem) add({ area: "blobs", subject: key, message: `${problem}${await affected(what)}` });
    if (++done % 256 === 0) progress({ area: "blobs", done, total });
  };
  await eachAtMost(o.concurrency ?? 8, keptChunks(sql), (c) => {
    counts.dfsChunks++;
    return check(c.key, c.size, { chunk: c.hash });
  });
  await eachAtMost(o.concurrency ?? 8, keptBlocks(sql), (b) => {
    counts.ipfsBlocks++;
    return check(b.key, b.size, { block: b.key });
  });
  progress({ area: "blobs", done, total });

  // Accounts' stored bytes against their files.
  progress({ area: "stored", done: 0 });
  for (const d of await storedTotalsDrift(sql)) {
    await fix({ area: "stored", subject: `account ${d.did}`, message: `stored bytes ${d.recorded}, its files hold ${d.actual}` }, true, () => recountStoredTotal(sql, d.did));
  }

  return { ok: unrepaired === 0, findings, more, repaired, counts, seconds: (performance.now() - started) / 1000 };
}

async function countKept(sql: Sql): Promise<number> {
  return (await chunkTotals(sql)).chunks + (await blockTotals(sql)).blocks;
}

/** What an ipfs root's DAG holds, walked through the blob store. */
interface Dag {
  /** Its blocks' keys (identity Cids carry their bytes and are no block), each with its size when
   * the walk read it (its dag-pb nodes, a raw root): a raw leaf's is its row's. */
  keys: Map<string, number | undefined>;
  /** A UnixFS directory (plain or HAMT-sharded) at its root: its size is its blocks' bytes. */
  directory: boolean;
  /** A file root's UnixFS file size (0 for a directory). */
  fileSize: number;
  problem?: string;
}

async function walkDag(store: BlobStore, root: string): Promise<Dag> {
  const keys = new Map<string, number | undefined>();
  let cid: CID;
  try {
    cid = CID.parse(root);
  } catch {
    return { keys, directory: false, fileSize: 0, problem: "its Cid does not parse" };
  }
  let directory = false;
  let fileSize = 0;
  const visit = async (c: CID, top: boolean): Promise<void> => {
    const inline = inlineBlock(c);
    const key = blockKey(c);
    // Each block once: a file of zeros links one node many times, folders share files.
    if (!inline && keys.has(key)) return;
    if (c.code === raw.code) {
      // A leaf's size is its row's (the blob pass checks the bytes); only a raw root is read here.
      const size = top ? (inline ?? (await store.bytes(key))).length : undefined;
      if (!inline) keys.set(key, size);
      if (top) fileSize = size as number;
      return;
    }
    if (c.code !== dagPb.code) throw new Error(`block ${c} is neither raw nor dag-pb`);
    const bytes = inline ?? (await store.bytes(key));
    if (!inline) keys.set(key, bytes.length);
    const node = dagPb.decode(bytes);
    const unixfs = node.Data ? UnixFS.unmarshal(node.Data) : undefined;
    if (top) {
      directory = unixfs?.type === "directory" || unixfs?.type === "hamt-sharded-directory";
      fileSize = unixfs && !directory ? Number(unixfs.fileSize()) : 0;
    }
    for (const link of node.Links) await visit(link.Hash, false);
  };
  try {
    await visit(cid, true);
    return { keys, directory, fileSize };
  } catch (err) {
    return { keys, directory: false, fileSize: 0, problem: `its DAG cannot be walked: ${(err as Error).message}` };
  }
}

/**
 * A directory's size as its import counts it: the bytes of its DAG's blocks, each once. A size
 * the walk did not read is its row's, else its blob's; undefined when a block has neither (the
 * index and blob passes report that block).
 */
async function dagBytes(sql: Sql, store: BlobStore, keys: Dag["keys"]): Promise<number | undefined> {
  let total = 0;
  const unread: string[] = [];
  for (const [key, size] of keys) {
    if (size === undefined) unread.push(key);
    else total += size;
  }
  const rows = await blockSizes(sql, unread);
  for (const key of unread) {
    const size = rows.get(key) ?? (await store.stat(key));
    if (size === undefined) return undefined;
    total += size;
  }
  return total;
}

/** Runs `fn` over an async stream of items, at most `n` at a time. */
async function eachAtMost<T>(n: number, items: AsyncIterable<T>, fn: (item: T) => Promise<void>): Promise<void> {
  const running = new Set<Promise<void>>();
  let failure: { error: unknown } | undefined;
  for await (const item of items) {
    if (failure) break;
    const p: Promise<void> = fn(item)
      .catch((error: unknown) => void (failure ??= { error }))
      .finally(() => running.delete(p));
    running.add(p);
    if (running.size >= n) await Promise.race(running);
  }
  await Promise.all(running);
  if (failure) throw failure.error;
}
