/**
 * `stowage put FILE.car --car` of the compiled binary against a served gateway, as a user runs it:
 * a CAR packed by the `ipfs-car` command keeps the Cid it printed, lists and downloads; a CAR with
 * one flipped byte is refused with the reason and keeps nothing; the flags that cannot go with
 * --car are refused before anything is sent.
 */
import { afterAll, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { CID } from "multiformats/cid";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { flipByteOfBlock, ipfsCarPack } from "../support/car.ts";
import { tempDir } from "../support/tmp.ts";

const dir = tempDir("e2e-car-cli");
const dataDir = join(dir, "data");
let server: RunningBinary | undefined;
afterAll(async () => {
  await server?.stop();
});

test("put --car imports a CAR from ipfs-car: its Cid, ls, get; a flipped byte keeps nothing", async () => {
  server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir]);
  const key = generatePrivateKey();
  const account = privateKeyToAccount(key);
  const did = `did:ethr:0x3d9:${account.address}`;
  for (const args of [["fund", account.address, "1"], ["grant", "--did", did, "--space", "16MiB"], ["grant", "--did", did, "--traffic", "32MiB"]]) {
    const r = await runBinary(["admin", ...args, "--data-dir", dataDir]);
    expect(r.code, r.stderr).toBe(0);
  }
  const user = (...args: string[]) => runBinary([...args, "--gateway", (server as RunningBinary).url], { STOWAGE_USER_KEY: key });

  const bytes = crypto.getRandomValues(new Uint8Array(60_000));
  await Bun.write(join(dir, "photo.jpg"), bytes);
  const { root, car } = await ipfsCarPack(join(dir, "photo.jpg"), { wrap: false });
  await Bun.write(join(dir, "photo.jpg.car"), car);
  const cid = CID.parse(root).toV1().toString();

  const put = await user("put", join(dir, "photo.jpg.car"), "--car");
  expect(put.code, put.stderr).toBe(0);
  expect(put.stdout).toMatch(new RegExp(`Cid ${cid} .* ipfs  photo\\.jpg\\n$`));
  const ls = await user("ls", "--from", "ipfs", "--json");
  expect((JSON.parse(ls.stdout) as { Cid: string; Name: string }[]).map((e) => [e.Name, e.Cid])).toEqual([["photo.jpg", cid]]);
  const out = join(dir, "back.jpg");
  const got = await user("get", cid, "--from", "ipfs", "--out", out);
  expect(got.code, got.stderr).toBe(0);
  expect(createHash("sha256").update(await Bun.file(out).bytes()).digest("hex")).toBe(createHash("sha256").update(bytes).digest("hex"));

  await Bun.write(join(dir, "bad.car"), await flipByteOfBlock(car, 0));
  const bad = await user("put", join(dir, "bad.car"), "--car");
  expect(bad.code).not.toBe(0);
  expect(bad.stderr).toContain("does not match its Cid");
  expect(JSON.parse((await user("ls", "--from", "ipfs", "--json")).stdout)).toHaveLength(1);

  const wrong = await user("put", join(dir, "photo.jpg.car"), "--car", "--to", "dfs");
  expect(wrong.code).not.toBe(0);
  expect(wrong.stderr).toContain("--car imports into ipfs");
}, 120_000);
