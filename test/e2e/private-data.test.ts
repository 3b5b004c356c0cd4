/**
 * D14: everything the compiled server writes is private. It starts on a data dir made 0755 (a git
 * clone's `./data`), makes it 0700, does real work (mail, login, uploads on both back-ends, the
 * chain), stops; then every file is 0600 (the one executable, anvil, 0700) and every folder 0700.
 * A 0755 data dir that belongs to another user is refused and left as it was.
 */
import { expect, test } from "bun:test";
import { chmodSync, chownSync, lstatSync, mkdirSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createAccountClient } from "../../src/sdk/account.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { runBinary, startBinary } from "../support/binary.ts";
import { TEST_BLOBS } from "../support/blobs.ts";
import { tempDir } from "../support/tmp.ts";

const timeout = 90_000;
const mode = (p: string) => statSync(p).mode & 0o777;

/** Every path under `root` with its type and permission bits. */
function walk(root: string): { path: string; kind: "dir" | "file" | "other"; mode: number }[] {
  const out: { path: string; kind: "dir" | "file" | "other"; mode: number }[] = [];
  for (const name of readdirSync(root)) {
    const path = join(root, name);
    const st = lstatSync(path);
    out.push({ path, kind: st.isDirectory() ? "dir" : st.isFile() ? "file" : "other", mode: st.mode & 0o777 });
    if (st.isDirectory()) out.push(...walk(path));
  }
  return out;
}

test("a 0755 data dir is made private at start, and all the server writes in it is 0600/0700", async () => {
  const dataDir = join(tempDir("private"), "data");
  mkdirSync(dataDir);
  chmodSync(dataDir, 0o755);
  const args = ["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir];
  const server = await startBinary(args);
  try {
    expect(mode(dataDir)).toBe(0o700);
    expect(server.output()).toContain('"msg":"data dir was open to other users: made it private"');
    expect(server.output()).toContain('"was":"755"');

    // Mail on disk (the dev mailbox) and an email account in the database.
    const accounts = createAccountClient({ baseUrl: server.url });
    await accounts.sendEmailCode("private@example.com");
    expect(readdirSync(join(dataDir, "mail")).length).toBe(1);

    // A storage user with quota, and one file on each back-end.
    const account = privateKeyToAccount(generatePrivateKey());
    const store = await connectStorage({ baseUrl: server.url, account });
    await store.login();
    for (const quota of [["--space", "64MiB"], ["--traffic", "64MiB"]]) {
      const grant = await runBinary(["admin", "grant", "--did", store.did, ...quota, "--data-dir", dataDir]);
      if (grant.code !== 0) throw new Error(`admin grant failed: ${grant.stderr}`);
    }
    const bytes = crypto.getRandomValues(new Uint8Array(3 * 1024 * 1024));
    for (const kind of ["dfs", "ipfs"] as const) {
      const entry = await store.upload(kind, bytes, { name: `secret-${kind}.bin` });
      expect(new Uint8Array(await (await store.download(kind, entry.Cid)).arrayBuffer())).toEqual(bytes);
    }
  } finally {
    expect(await server.stop("SIGTERM")).toBe(0);
  }

  const entries = walk(dataDir);
  const rel = (p: string) => relative(dataDir, p);
  // The walk saw what the work wrote: database, chain state, mail, chunks, blocks, keys.
  const files = entries.filter((e) => e.kind === "file").map((e) => rel(e.path));
  for (const wanted of ["stowage.db", "chain/state.json", "secrets/jwt.key", "ipfs/peer.key"]) expect(files).toContain(wanted);
  // Chunks and blocks are files here on the local blob store; on S3 (the S3 pass) they are objects.
  const blobs = TEST_BLOBS === "local" ? ["blobs/dfs/", "blobs/ipfs/"] : [];
  for (const prefix of ["mail/", ...blobs, "ipfs/datastore/"]) expect(files.some((f) => f.startsWith(prefix))).toBe(true);

  const open = entries.filter((e) => (e.mode & 0o077) !== 0).map((e) => `${rel(e.path)} ${e.mode.toString(8)}`);
  expect(open).toEqual([]);
  const dirs = entries.filter((e) => e.kind === "dir" && e.mode !== 0o700).map((e) => `${rel(e.path)} ${e.mode.toString(8)}`);
  expect(dirs).toEqual([]);
  // Regular files are 0600; the only executable is the anvil the binary unpacks.
  const loose = entries.filter((e) => e.kind === "file" && e.mode !== 0o600 && !(rel(e.path) === "bin/anvil" && e.mode === 0o700)).map((e) => `${rel(e.path)} ${e.mode.toString(8)}`);
  expect(loose).toEqual([]);
  expect(entries.filter((e) => e.kind === "other").map((e) => rel(e.path))).toEqual([]);
}, timeout);

test("a data dir open to others that belongs to another user is refused, and left untouched", async () => {
  // As root, a folder given to `nobody`; otherwise any root-owned 0755 folder is someone else's.
  let dataDir = "/usr";
  if (process.getuid?.() === 0) {
    dataDir = join(tempDir("private"), "theirs");
    mkdirSync(dataDir);
    chmodSync(dataDir, 0o755);
    chownSync(dataDir, 65534, 65534);
  }
  const before = readdirSync(dataDir);
  const r = await runBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir]);
  expect(r.code).toBe(1);
  expect(r.stderr).toContain(`data dir ${dataDir} is open to other users (mode 755)`);
  expect(r.stderr).toContain("chmod 700");
  expect(mode(dataDir)).toBe(0o755);
  expect(readdirSync(dataDir)).toEqual(before);
}, timeout);
