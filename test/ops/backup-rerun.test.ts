/**
 * A backup run again into the folder of a complete backup (one folder per gateway, as the README
 * says) never leaves it without one. Killed with SIGKILL before or after its database snapshot,
 * while it copies blobs, or before its manifest, the folder restores byte for byte to what the
 * complete backup restored to; killed once its manifest is in place, to the new backup; run again,
 * it finishes the new backup, copying no blob a killed run copied, and removes what only the old
 * one needed (its database, the blobs of files deleted since). A run that fails (a full disk)
 * leaves the first as it was too, and removes its own unfinished generation.
 *
 * A gateway on SQLite and local files: the configuration whose blobs `stowage admin backup` copies.
 */
import { expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { Database } from "bun:sqlite";
import type { BackupProgress, BackupReport } from "../../src/ops/backup.ts";
import { runRestore } from "../../src/ops/restore.ts";
import { runBackup } from "../../src/ops/backup.ts";
import { parseConfig } from "../../src/config.ts";
import { LocalBlobStore } from "../../src/blob/local.ts";
import { chunkKey } from "../../src/storage/dfs/cid.ts";
import { testGateway } from "../support/storage.ts";
import { tempDir } from "../support/tmp.ts";

const gw = await testGateway();
const { client } = await gw.user();
const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));
const root = tempDir("ops-backup-rerun");
const dest = join(root, "backup");
const script = join(import.meta.dir, "backup-frozen.ts");

/** The backup's own code in a process of its own, to the end (`none`) or frozen at `step`. */
async function backup(step: BackupProgress["step"] | "none"): Promise<{ report?: BackupReport; frozen?: BackupProgress }> {
  const proc = Bun.spawn([process.execPath, script, gw.dataDir, dest, step], { stdout: "pipe", stderr: "pipe" });
  let out = "";
  const reader = proc.stdout.getReader();
  while (!out.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    out += new TextDecoder().decode(value);
  }
  if (step === "none") {
    await proc.exited;
    if (proc.exitCode !== 0) throw new Error(`backup failed: ${await new Response(proc.stderr).text()}`);
    return { report: JSON.parse(out) as BackupReport };
  }
  expect(out).toStartWith("frozen ");
  proc.kill("SIGKILL");
  await proc.exited;
  expect(proc.signalCode).toBe("SIGKILL");
  return { frozen: JSON.parse(out.slice("frozen ".length)) as BackupProgress };
}

/** Every file under `dir` by path: its bytes' SHA-256 (the restored data dir, compared whole). */
function treeOf(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else out[relative(dir, join(d, e.name))] = new Bun.CryptoHasher("sha256").update(readFileSync(join(d, e.name))).digest("hex");
    }
  };
  walk(dir);
  return out;
}

let restores = 0;
/** Restores DEST as `stowage admin restore` does, into a new data dir: its files, and the names its database lists. */
async function restored(): Promise<{ tree: Record<string, string>; names: string[] }> {
  const dir = join(root, `restored-${++restores}`);
  await runRestore({ src: dest, dataDir: dir });
  const db = new Database(join(dir, "stowage.db"), { readonly: true });
  try {
    const names = db.query<{ name: string }, []>("SELECT name FROM files ORDER BY name").all().map((r) => r.name);
    return { tree: treeOf(dir), names };
  } finally {
    db.close();
  }
}

const chunksOf = async (cid: string) => (await gw.database.sql.all<{ hash: string }>("SELECT hash FROM dfs_object_chunks WHERE cid = $1", [cid])).map((r) => chunkKey(r.hash));
const manifestText = () => readFileSync(join(dest, "manifest.json"), "utf8");
const generations = () => readdirSync(join(dest, "generations")).sort();
/** A generation's folder name (the manifest names it as `generations/<name>`). */
const nameOf = (generation: string) => generation.slice("generations/".length);

test("a backup killed at any step of a second run leaves the first restorable, byte for byte; a rerun finishes the second", async () => {
  await client.upload("dfs", random(2.5 * 1024 * 1024), { name: "kept.bin" });
  await client.upload("ipfs", random(700_000), { name: "kept-ipfs.bin" });
  const gone = await client.upload("dfs", random(1.5 * 1024 * 1024), { name: "gone.bin" });
  const goneChunks = await chunksOf(gone.Cid);
  const first = (await backup("none")).report as BackupReport;
  const firstManifest = manifestText();
  const before = await restored();
  expect(before.names).toEqual(["gone.bin", "kept-ipfs.bin", "kept.bin"]);

  // The gateway moves on: a file deleted (its chunks no longer named), new ones on both back-ends.
  await client.delete(gone.ID);
  await client.upload("dfs", random(6 * 1024 * 1024 + 5), { name: "new.bin" });
  await client.upload("ipfs", random(900_000), { name: "new-ipfs.bin" });
  const store = new LocalBlobStore(join(dest, "blobs"));

  for (const step of ["database", "chain", "blobs", "manifest"] as const) {
    const { frozen } = await backup(step);
    // Killed in the middle of the copy, not after it.
    if (step === "blobs") expect(frozen?.done as number).toBeLessThan(frozen?.total as number);
    expect(manifestText()).toBe(firstManifest);
    expect(readFileSync(join(dest, "INCOMPLETE"), "utf8")).toContain("still names the last complete backup");
    for (const key of goneChunks) expect(await store.stat(key)).toBeGreaterThan(0);
    const after = await restored();
    expect(after.tree).toEqual(before.tree);
    expect(after.names).toEqual(before.names);
    // The first backup's generation, and the killed run's (removed by the next run).
    expect(generations()).toHaveLength(2);
    expect(generations()).toContain(nameOf(first.manifest.generation));
  }

  // Failed rather than killed (a full disk while blobs are copied): the same, and the run gives
  // back the room of its generation at once.
  const failing = runBackup({
    config: parseConfig(["--data-dir", gw.dataDir], {}),
    dest,
    progress: (p) => {
      if (p.step === "blobs") throw new Error("ENOSPC: no space left on device");
    },
  });
  await expect(failing).rejects.toThrow("ENOSPC");
  expect(generations()).toEqual([nameOf(first.manifest.generation)]);
  expect(manifestText()).toBe(firstManifest);
  expect((await restored()).tree).toEqual(before.tree);

  // Killed once its manifest is in place: the folder is the second backup, before anything is removed.
  await backup("prune");
  const second = JSON.parse(manifestText()) as BackupReport["manifest"];
  expect(second.generation).not.toBe(first.manifest.generation);
  expect(existsSync(join(dest, "INCOMPLETE"))).toBe(false);
  const then = await restored();
  expect(then.names).toEqual(["kept-ipfs.bin", "kept.bin", "new-ipfs.bin", "new.bin"]);
  expect(generations()).toContain(nameOf(first.manifest.generation));

  // Run again: complete, with every blob already there, and nothing left of the first.
  const last = (await backup("none")).report as BackupReport;
  expect(last.blobs).toMatchObject({ copied: 0, present: last.blobs.listed, damaged: [] });
  expect(last.blobs.pruned).toBe(goneChunks.length);
  for (const key of goneChunks) expect(await store.stat(key)).toBeUndefined();
  expect(generations()).toEqual([nameOf(last.manifest.generation)]);
  expect(existsSync(join(dest, "INCOMPLETE"))).toBe(false);
  const now = await restored();
  expect(now.names).toEqual(then.names);
  // Only the blobs the new generation names are left.
  const kept: string[] = [];
  for (const prefix of ["dfs/", "ipfs/"]) for await (const key of store.list(prefix)) kept.push(key);
  const listed = readFileSync(join(dest, last.manifest.generation, "blobs.list"), "utf8").trim().split("\n").map((l) => l.split(" ")[0] as string);
  expect(kept.sort()).toEqual(listed.sort());
}, 120_000);
