/**
 * `stowage admin check` on this pass's configuration (SQLite or PostgreSQL, local files or Ceph
 * RGW: `STOWAGE_TEST_DB`, `STOWAGE_TEST_BLOBS`), run as an operator runs it, through the command
 * line's own code with the settings a gateway over this data dir has: a gateway whose rows and
 * blobs agree passes, folders imported from a CAR too; a deleted chunk, a corrupt block, counts off
 * by one and a root's size its DAG does not hold are each found and named (with the files they
 * break), and `--repair` sets the counts right.
 */
import { afterEach, describe, expect, test } from "bun:test";
import * as dagPb from "@ipld/dag-pb";
import { UnixFS } from "ipfs-unixfs";
import { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import { identity } from "multiformats/hashes/identity";
import { sha256 } from "multiformats/hashes/sha2";
import { runAdmin } from "../../src/cli/admin.ts";
import { chunkKey } from "../../src/storage/dfs/cid.ts";
import { createFiles } from "../../src/storage/files.ts";
import { blockKey } from "../../src/storage/ipfs/blocks.ts";
import { type Block, importTree, writeCar } from "../support/car.ts";
import { blobEnv } from "../support/blobs.ts";
import { TEST_DB, testDatabaseUrlOf } from "../support/db.ts";
import { testGateway } from "../support/storage.ts";

const gw = await testGateway();
const sql = gw.database.sql;
const store = gw.blobs.store;
const ipfs = gw.backends.ipfs as NonNullable<typeof gw.backends.ipfs>;
const { client } = await gw.user();

const env: Record<string, string> = { STOWAGE_DATA_DIR: gw.dataDir, ...blobEnv(gw.dataDir), ...(TEST_DB === "postgres" ? { STOWAGE_DATABASE_URL: await testDatabaseUrlOf(gw.dataDir) } : {}) };

interface Report {
  ok: boolean;
  findings: { area: string; subject: string; message: string; repaired?: boolean }[];
  repaired: number;
  counts: { files: number; dfsObjects: number; ipfsRoots: number; blobsChecked: number };
}

async function check(...args: string[]): Promise<{ code: number; report: Report }> {
  const out: string[] = [];
  const code = await runAdmin(["check", "--json", ...args], env, (l) => out.push(l), () => {}, false);
  return { code, report: JSON.parse(out.join("\n")) as Report };
}

const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));
// Three chunks each (1 MiB + 1 MiB + 0.5 MiB), a small file on each back-end, and content shared
// by two files (one object, two holders).
const big = random(2.5 * 1024 * 1024);
const dfsFile = await client.upload("dfs", big, { name: "big.bin" });
const ipfsFile = await client.upload("ipfs", big, { name: "big.bin" });
await client.upload("dfs", random(1000), { name: "small.bin" });
await client.upload("ipfs", random(1000), { name: "small.bin" });
await client.upload("dfs", big, { name: "copy-of-big.bin" });
// Replaced and deleted files leave nothing behind.
await client.upload("dfs", random(2000), { name: "small.bin" });
const gone = await client.upload("dfs", random(3000), { name: "gone.bin" });
await client.delete(gone.ID);

const chunksOf = async (cid: string) => (await sql.all<{ hash: string }>("SELECT hash FROM dfs_object_chunks WHERE cid = $1 ORDER BY idx", [cid])).map((r) => r.hash);
/** The leaves of an ipfs root: every block of its index but the root itself. */
const leavesOf = async (cid: string) => (await sql.all<{ key: string }>("SELECT key FROM ipfs_object_blocks WHERE cid = $1 ORDER BY key", [cid])).map((r) => r.key).filter((k) => k !== blockKey(CID.parse(cid)));

/**
 * A folder's CAR as a user packs one: `files` under one directory (HAMT-sharded past `shardAbove`
 * bytes of links); with `note`, wrapped in a directory that also holds a small file inlined in its
 * Cid (an identity hash: no block of its own). Its size as an import counts it: its blocks' bytes,
 * each once.
 */
async function folderCar(files: { path: string; content: Uint8Array }[], o: { shardAbove?: number; note?: boolean } = {}): Promise<{ root: CID; car: Uint8Array; blocks: Block[]; bytes: number }> {
  const { root: inner, blocks } = await importTree(files, o);
  if (!o.note) return carOf(inner, blocks);
  const note = new TextEncoder().encode("inlined");
  const outer = dagPb.encode(
    dagPb.prepare({
      Data: new UnixFS({ type: "directory" }).marshal(),
      Links: [
        { Name: "folder", Hash: inner },
        { Name: "note.txt", Hash: CID.createV1(raw.code, identity.digest(note)), Tsize: note.byteLength },
      ],
    }),
  );
  const root = CID.createV1(dagPb.code, await sha256.digest(outer));
  return carOf(root, [...blocks, { cid: root, bytes: outer }]);
}

async function carOf(root: CID, blocks: Block[]) {
  return { root, car: await writeCar([root], blocks), blocks, bytes: blocks.reduce((n, b) => n + b.bytes.byteLength, 0) };
}

/** Imports a folder's CAR; the test's undo deletes its file again (as an S3 delete does: the
 * storage API deletes dfs files only). */
async function importFolder(folder: Awaited<ReturnType<typeof folderCar>>, name: string) {
  const list = await client.importCar(new Blob([folder.car]), { name });
  const [entry] = list.Object;
  if (!entry) throw new Error("no file imported");
  undo.push(async () => {
    await createFiles(sql).remove(client.did, "ipfs", entry.ID);
    await ipfs.release(entry.Cid);
  });
  return entry;
}

/** Each test leaves the gateway as it found it (a check must pass between tests). */
const undo: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const u of undo.splice(0).reverse()) await u();
  expect((await check()).report.findings).toEqual([]);
});

describe("stowage admin check", () => {
  test("passes when rows and blobs agree, and counts what it looked at", async () => {
    const { code, report } = await check();
    expect(report.findings).toEqual([]);
    expect(code).toBe(0);
    expect(report.ok).toBe(true);
    // big.bin ×2 on dfs (one object), small.bin on dfs; big.bin and small.bin on ipfs.
    expect(report.counts).toMatchObject({ files: 5, dfsObjects: 2, ipfsRoots: 2 });
    // 3 + 1 chunks, and 3 leaves + a root + 1 block.
    expect(report.counts.blobsChecked).toBe(9);
  });

  test("passes on folders imported from a CAR, plain and HAMT-sharded: a folder's size is its blocks' bytes", async () => {
    const shared = random(3000);
    const plain = await folderCar([
      { path: "index.html", content: random(700) },
      { path: "img/a.bin", content: random(1.5 * 1024 * 1024) },
      // The same bytes twice: one block, counted once.
      { path: "img/b.bin", content: shared },
      { path: "img/copy-of-b.bin", content: shared },
    ], { note: true });
    const sharded = await folderCar(
      Array.from({ length: 40 }, (_, i) => ({ path: `photo-${i}.jpg`, content: random(200 + i) })),
      { shardAbove: 100 },
    );
    const top = sharded.blocks.find((b) => b.cid.equals(sharded.root));
    expect(UnixFS.unmarshal(dagPb.decode(top?.bytes as Uint8Array).Data as Uint8Array).type).toBe("hamt-sharded-directory");
    for (const [folder, name] of [[plain, "site.car"], [sharded, "photos.car"]] as const) {
      const entry = await importFolder(folder, name);
      expect([entry.Cid, entry.Size]).toEqual([folder.root.toString(), folder.bytes]);
    }
    const { code, report } = await check();
    expect(report.findings).toEqual([]);
    expect(code).toBe(0);
    expect(report.counts).toMatchObject({ files: 7, ipfsRoots: 4 });
  });

  test("finds a root whose row says a size its DAG does not hold: a file's and a folder's", async () => {
    const folder = await folderCar([{ path: "a.bin", content: random(5000) }, { path: "b/c.bin", content: random(70_000) }], { note: true });
    const entry = await importFolder(folder, "folder.car");
    for (const [cid, by] of [[entry.Cid, 7], [ipfsFile.Cid, -1]] as const) {
      await sql.run("UPDATE ipfs_pins SET size = size + $2 WHERE cid = $1", [cid, by]);
      undo.push(() => sql.run("UPDATE ipfs_pins SET size = size - $2 WHERE cid = $1", [cid, by]));
    }
    const { code, report } = await check();
    expect(code).toBe(1);
    expect(report.findings.filter((f) => f.area === "manifests")).toEqual([
      { area: "manifests", subject: `ipfs content ${entry.Cid}`, message: `its row says ${folder.bytes + 7} bytes, its folder's blocks hold ${folder.bytes}` },
      { area: "manifests", subject: `ipfs content ${ipfsFile.Cid}`, message: `its row says ${big.byteLength - 1} bytes, its DAG holds ${big.byteLength}` },
    ].sort((a, b) => (a.subject < b.subject ? -1 : 1)));
    // Each file row now differs from its content's row too.
    expect(report.findings.filter((f) => f.area === "files").map((f) => f.subject)).toHaveLength(2);
  });

  test("finds a deleted chunk, and names the files that need it", async () => {
    const [, second] = await chunksOf(dfsFile.Cid);
    const key = chunkKey(second as string);
    const bytes = await store.bytes(key);
    await store.delete(key);
    undo.push(() => store.put(key, bytes));
    const { code, report } = await check();
    expect(code).toBe(1);
    expect(report.ok).toBe(false);
    expect(report.findings).toHaveLength(1);
    const [finding] = report.findings;
    expect(finding).toMatchObject({ area: "blobs", subject: key });
    expect(finding?.message).toContain("missing from the blob store");
    expect(finding?.message).toContain('"big.bin"');
    expect(finding?.message).toContain('"copy-of-big.bin"');
    // Without hashing too: a missing blob is found by its absence.
    expect((await check("--fast")).report.findings.map((f) => f.subject)).toEqual([key]);
  });

  test("finds a corrupt block: same size, one byte flipped", async () => {
    const [leaf] = await leavesOf(ipfsFile.Cid);
    const key = leaf as string;
    const bytes = await store.bytes(key);
    const flipped = Uint8Array.from(bytes);
    flipped[1000] = (flipped[1000] as number) ^ 0x01;
    await store.put(key, flipped);
    undo.push(() => store.put(key, bytes));
    const { code, report } = await check();
    expect(code).toBe(1);
    expect(report.findings).toHaveLength(1);
    expect(report.findings[0]).toMatchObject({ area: "blobs", subject: key });
    expect(report.findings[0]?.message).toContain("SHA-256 differs from its key");
    expect(report.findings[0]?.message).toContain('"big.bin"');
    // --fast reads sizes only: a flipped byte is what hashing is for.
    expect((await check("--fast")).report.findings).toEqual([]);
  });

  test("finds an account's stored bytes off by one; --repair sets them to its files' sum", async () => {
    await sql.run("UPDATE stored_totals SET bytes = bytes + 1 WHERE did = $1", [client.did]);
    const found = await check();
    expect(found.code).toBe(1);
    expect(found.report.findings).toEqual([{ area: "stored", subject: `account ${client.did}`, message: expect.stringContaining("its files hold") }]);
    const { code, report } = await check("--repair");
    expect(code).toBe(0);
    expect(report.repaired).toBe(1);
    expect(report.findings[0]?.repaired).toBe(true);
    const row = await sql.get<{ bytes: number }>("SELECT bytes FROM stored_totals WHERE did = $1", [client.did]);
    const sum = await sql.get<{ n: number }>("SELECT CAST(SUM(size) AS BIGINT) AS n FROM files WHERE did = $1", [client.did]);
    expect(row?.bytes).toBe(sum?.n as number);
  });

  test("finds a chunk's and a block's references off by one, either way; --repair recounts them", async () => {
    const [chunk] = await chunksOf(dfsFile.Cid);
    const [leaf] = await leavesOf(ipfsFile.Cid);
    await sql.run("UPDATE dfs_chunks SET refs = refs + 1 WHERE hash = $1", [chunk as string]);
    await sql.run("UPDATE ipfs_blocks SET refs = refs - 1 WHERE key = $1", [leaf as string]);
    const found = await check();
    expect(found.code).toBe(1);
    const messages = Object.fromEntries(found.report.findings.map((f) => [f.subject, f.message]));
    expect(messages).toEqual({ [`dfs chunk ${chunk}`]: "2 references, 1 manifests name it", [`ipfs block ${leaf}`]: "0 references, 1 roots hold it" });
    const repaired = await check("--repair");
    expect(repaired.code).toBe(0);
    expect(repaired.report.repaired).toBe(2);
    expect((await sql.get<{ refs: number }>("SELECT refs FROM dfs_chunks WHERE hash = $1", [chunk as string]))?.refs).toBe(1);
    expect((await sql.get<{ refs: number }>("SELECT refs FROM ipfs_blocks WHERE key = $1", [leaf as string]))?.refs).toBe(1);
  });

  test("finds content whose references and holders (file rows) differ; --repair with no gateway running sets them", async () => {
    await sql.run("UPDATE dfs_objects SET refs = refs - 1 WHERE cid = $1", [dfsFile.Cid]);
    const found = await check();
    expect(found.code).toBe(1);
    expect(found.report.findings).toHaveLength(1);
    expect(found.report.findings[0]).toMatchObject({ area: "references", subject: `dfs content ${dfsFile.Cid}` });
    // Two files hold it: one reference would let deleting either delete the other's content.
    expect(found.report.findings[0]?.message).toContain("1 references, 2 holders: releasing them would delete content still in use");
    // This test's gateway runs no lease and holds no data-dir lock: no gateway is running here.
    const { code, report } = await check("--repair");
    expect(code).toBe(0);
    expect(report.repaired).toBe(1);
    expect((await sql.get<{ refs: number }>("SELECT refs FROM dfs_objects WHERE cid = $1", [dfsFile.Cid]))?.refs).toBe(2);
  });

  test("reports without --repair, and changes nothing", async () => {
    await sql.run("UPDATE stored_totals SET bytes = bytes - 1 WHERE did = $1", [client.did]);
    undo.push(() => sql.run("UPDATE stored_totals SET bytes = bytes + 1 WHERE did = $1", [client.did]));
    const before = await sql.get<{ bytes: number }>("SELECT bytes FROM stored_totals WHERE did = $1", [client.did]);
    expect((await check()).code).toBe(1);
    expect((await check()).code).toBe(1);
    expect(await sql.get<{ bytes: number }>("SELECT bytes FROM stored_totals WHERE did = $1", [client.did])).toEqual(before as { bytes: number });
  });
});

test("--help, and bad usage exits with 2", async () => {
  const { main } = await import("../../src/main.ts");
  const out: string[] = [];
  const log = console.log;
  console.log = (l: string) => out.push(l);
  try {
    expect(await main(["admin", "check", "--help"])).toBe(0);
  } finally {
    console.log = log;
  }
  expect(out.join("\n")).toContain("Usage: stowage admin check");
  await expect(runAdmin(["check", "extra"], env, () => {}, () => {}, false)).rejects.toThrow("unexpected argument extra");
});
