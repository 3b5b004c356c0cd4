/**
 * Quota holds of in-flight transfers (D7, D14): an upload holds only the bytes that have arrived,
 * so parallel uploads whose files fit the free space all succeed, stalled or aborted uploads keep
 * no more than they received, and only expired holds are ever cleared.
 */
import { describe, expect, test } from "bun:test";
import type { Address } from "viem";
import { CID } from "multiformats/cid";
import { createMeter, RESERVATION_TTL_MS } from "../../src/quota/meter.ts";
import { chunkKey } from "../../src/storage/dfs/cid.ts";
import { cidOf } from "../../src/storage/dfs/index.ts";
import { readJson, stalledRequest, statusOf } from "../support/app.ts";
import { testGateway } from "../support/storage.ts";
import { granter } from "./grants.ts";

const gw = await testGateway({ quota: true, ipfs: false });
const meter = gw.quota!.meter;
const sql = gw.database.sql;

const grant = granter(gw.chain);

const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));
/** A meter of its own whose accounts store nothing (its tests move only its clock and holds). */
const nothingStored = () => ({ text: "0", params: [] });
const holdsOf = (account: Address) => sql.all<{ kind: string; bytes: number; gateway: string }>("SELECT kind, bytes, gateway FROM quota_reservations WHERE account = $1 ORDER BY id", [account]);
const addHold = (h: { account: Address; bytes: number; createdAt: number; gateway: string; expiresAt: number }) =>
  sql.run("INSERT INTO quota_reservations (account, kind, bytes, created_at, gateway, expires_at) VALUES ($1, 'space', $2, $3, $4, $5)", [h.account, h.bytes, h.createdAt, h.gateway, h.expiresAt]);

/**
 * An upload whose client sends the first `sent` bytes of its body and then stalls (stalledRequest).
 */
async function stalledUpload(s: Awaited<ReturnType<typeof gw.session>>, requestID: number, file: Uint8Array, sent: number) {
  const { request, abort, finish } = await stalledRequest(await gw.uploadRequest(s, { requestID, bytes: file, name: `stalled-${requestID}.bin` }), sent);
  return { answer: gw.app.handle(request), abort, finish };
}

describe("parallel uploads", () => {
  test("with 1 MB of space, 3 parallel 64 KB uploads all succeed", async () => {
    const { client, account } = await gw.user();
    await grant(account.address, "space", 1_000_000);
    await grant(account.address, "traffic", 100_000_000);
    const results = await Promise.all([0, 1, 2].map((i) => statusOf(client.upload("dfs", random(64 * 1024), { name: `p${i}` }))));
    expect(results).toEqual([200, 200, 200]);
    expect((await client.space()).SizeByte).toBe(1_000_000 - 3 * 64 * 1024);
  });

  test("N parallel uploads whose sizes sum exactly to the free space all succeed; one more byte is 402 and keeps nothing", async () => {
    const { client, account } = await gw.user();
    const sizes = [1, 700, 4096, 65_536, 100_000, 1_048_577, 2_500_000, 333_333, 12_345, 999];
    const sum = sizes.reduce((a, b) => a + b, 0);
    const already = 50_000;
    // Both pools fit exactly: the space left after a stored file, and the traffic of the uploads.
    await grant(account.address, "space", already + sum);
    await grant(account.address, "traffic", already + sum);
    await client.upload("dfs", random(already), { name: "already.bin" });
    expect((await client.space()).SizeByte).toBe(sum);

    const results = await Promise.all(sizes.map((n, i) => statusOf(client.upload("dfs", random(n), { name: `exact-${i}` }))));
    expect(results).toEqual(sizes.map(() => 200));
    expect((await client.space()).SizeByte).toBe(0);
    expect((await client.traffic()).SizeByte).toBe(0);

    const before = (await client.list("dfs")).Object;
    expect(before).toHaveLength(sizes.length + 1);
    expect(await statusOf(client.upload("dfs", random(1), { name: "one-more" }))).toBe(402);
    expect((await client.list("dfs")).Object).toEqual(before);
    expect(await holdsOf(account.address)).toEqual([]);
  });
});

describe("stalled and aborted uploads", () => {
  test("hold no more than the bytes they received, and nothing once aborted", async () => {
    const { account, client } = await gw.user();
    const MiB = 1024 * 1024;
    const space = 16 * MiB;
    await grant(account.address, "space", space);
    await grant(account.address, "traffic", 1_000 * MiB);
    const s = await gw.session(account);
    // 8 uploads declare 3 MiB files each and stall after 1 MiB of their bodies.
    const stalled = await Promise.all(Array.from({ length: 8 }, (_, i) => stalledUpload(s, 100 + i, random(3 * MiB), MiB)));
    // Whatever they hold is at most what they received (8 MiB), so the other 8 MiB take a file.
    const other = await statusOf(client.upload("dfs", random(space - 8 * MiB), { name: "beside-the-stalled.bin" }));
    expect(other).toBe(200);
    const held = (await holdsOf(account.address)).filter((h) => h.kind === "space").reduce((n, h) => n + h.bytes, 0);
    expect(held).toBeLessThanOrEqual(8 * MiB);

    for (const u of stalled) u.abort();
    const answers = await Promise.all(stalled.map((u) => u.answer));
    for (const a of answers) expect(a.status).toBe(400);
    expect((await readJson(answers[0] as Response)).Description).toMatch(/interrupted/);
    expect(await holdsOf(account.address)).toEqual([]);
    expect((await client.space()).SizeByte).toBe(8 * MiB);
  });
});

describe("renewing holds", () => {
  test("a download renews its hold while bytes flow, past the TTL; once they stop, the hold expires and stops counting", async () => {
    const { account, client } = await gw.user();
    await grant(account.address, "traffic", 1_000_000);
    let clock = Date.now();
    const timed = createMeter({ sql, records: gw.quota!.records, storedBytes: nothingStored, now: () => clock });
    const trafficLeft = async () => (await timed.record(account.address, client.did, "traffic")).SizeByte;
    const down = await timed.beginDownload(account.address, 600_000);
    expect(await trafficLeft()).toBe(400_000);
    // Bytes flow for twice the TTL; each 10 s of it renews the hold.
    for (let waited = 0; waited < 2 * RESERVATION_TTL_MS; waited += 10_000) {
      clock += 10_000;
      await down.renew();
    }
    expect(await trafficLeft()).toBe(400_000);
    expect(await timed.beginDownload(account.address, 400_001).then(() => 200, (err: { code?: string }) => err.code)).toBe("quota-exceeded");
    // The client goes silent: a TTL after the last renewal, the hold no longer counts.
    clock += RESERVATION_TTL_MS;
    expect(await trafficLeft()).toBe(1_000_000);
    await down.settle(0);
    expect(await holdsOf(account.address)).toEqual([]);
  });

  test("a slow upload renews its holds as its bytes trickle in, past the TTL; once they stop, the holds expire", async () => {
    const { account, client } = await gw.user();
    await grant(account.address, "space", 1_000_000);
    await grant(account.address, "traffic", 1_000_000);
    let clock = Date.now();
    const timed = createMeter({ sql, records: gw.quota!.records, storedBytes: nothingStored, now: () => clock });
    const spaceLeft = async () => (await timed.record(account.address, client.did, "space")).SizeByte;
    // Far below the declared length, so only the time since the last record makes it check again.
    const up = await timed.beginUpload(account.address, client.did, { declared: 100_000, backend: "dfs", name: "slow.bin" });
    for (let waited = 0; waited < 2 * RESERVATION_TTL_MS; waited += 10_000) {
      clock += 10_000;
      await up.add(10);
    }
    expect(await spaceLeft()).toBe(1_000_000 - 120);
    clock += RESERVATION_TTL_MS;
    expect(await spaceLeft()).toBe(1_000_000);
    await up.release();
    expect(await holdsOf(account.address)).toEqual([]);
  });
});

describe("an upload refused by the exact check", () => {
  // Its content's rows would commit in the file row's transaction: refused there, none
  // of them stays, nor its pins, nor its chunk.
  test("when another upload filled the space while its bytes arrived: 402, and nothing of it is kept", async () => {
    const { account, client } = await gw.user();
    await grant(account.address, "space", 10_000);
    await grant(account.address, "traffic", 1_000_000);
    const s = await gw.session(account);
    const file = random(6_000);
    // Its first look found 10,000 bytes free, more than it declares: it holds nothing as it streams.
    const late = await stalledUpload(s, 1, file, 3_000);
    expect(await statusOf(client.upload("dfs", random(6_000), { name: "first.bin" }))).toBe(200);
    late.finish();
    const answer = await late.answer;
    expect(answer.status).toBe(402);
    expect((await readJson(answer)).Description).toMatch(/not enough space/);
    const cid = await cidOf([file]);
    expect(await gw.backends.dfs?.stat(cid)).toBeUndefined();
    expect(await sql.get("SELECT cid FROM dfs_objects WHERE cid = $1", [cid])).toBeUndefined();
    expect(await sql.all("SELECT key FROM blob_pins")).toEqual([]);
    const hash = Buffer.from(CID.parse(cid).multihash.digest).toString("hex");
    expect(await sql.get("SELECT hash FROM dfs_chunks WHERE hash = $1", [hash])).toBeUndefined();
    expect(await gw.blobs.store.stat(chunkKey(hash))).toBeUndefined();
    expect((await client.list("dfs")).Object.map((o) => o.Name)).toEqual(["first.bin"]);
    expect((await client.space()).SizeByte).toBe(4_000);
  });
});

describe("clearing holds", () => {
  test("a start-up cleanup clears expired holds only: live ones (this gateway's or another's) stay and count", async () => {
    const { account, client } = await gw.user();
    await grant(account.address, "space", 1_000_000);
    await grant(account.address, "traffic", 100_000_000);
    // An upload in flight on this gateway, whose 100 kB arrived 10 s after it began: it holds them
    // (a first look, before any byte, holds nothing).
    let clock = Date.now();
    const here = createMeter({ sql, records: gw.quota!.records, storedBytes: nothingStored, now: () => clock, gateway: "this-gateway" });
    const live = await here.beginUpload(account.address, client.did, { declared: 200_000, backend: "dfs", name: "in-flight.bin" });
    expect(await holdsOf(account.address)).toEqual([]);
    clock += 10_000;
    await live.add(100_000);
    const now = Date.now();
    await addHold({ account: account.address, bytes: 300_000, createdAt: now, gateway: "another-gateway", expiresAt: now + 60_000 });
    await addHold({ account: account.address, bytes: 400_000, createdAt: now - 120_000, gateway: "a-dead-gateway", expiresAt: now - 1 });
    // An expired hold no longer counts, even before anything clears it.
    expect((await client.space()).SizeByte).toBe(600_000);

    expect(await meter.clearStale()).toBe(1);
    const left = await holdsOf(account.address);
    expect(left.map((h) => `${h.kind} ${h.gateway}`).sort()).toEqual(["space this-gateway", "space another-gateway", "traffic this-gateway"].sort());
    // Live holds, this gateway's and another's, still count.
    expect((await client.space()).SizeByte).toBe(600_000);
    expect(await statusOf(client.upload("dfs", random(600_001), { name: "too-big" }))).toBe(402);

    await live.release();
    expect((await holdsOf(account.address)).map((h) => h.gateway)).toEqual(["another-gateway"]);
    expect(await statusOf(client.upload("dfs", random(700_000), { name: "fits" }))).toBe(200);
    expect((await client.space()).SizeByte).toBe(0);
  });
  // A gateway killed mid-transfer (kill -9) leaves live holds under its id; started again on the
  // same data dir it has the same id (the data dir's lock lets one process at a time use it).
  test("a gateway started again clears its own holds at once, live or not; another gateway's live holds and lasting ones stay", async () => {
    const { account, client } = await gw.user();
    await grant(account.address, "space", 1_000_000);
    await grant(account.address, "traffic", 100_000_000);
    // Its upload's 500 kB arrived 10 s after it began: it holds them (and their traffic).
    let clock = Date.now();
    const dead = createMeter({ sql, records: gw.quota!.records, storedBytes: nothingStored, now: () => clock, gateway: "host/restarted-gateway" });
    const cut = await dead.beginUpload(account.address, client.did, { declared: 900_000, backend: "dfs", name: "cut.bin" });
    clock += 10_000;
    await cut.add(500_000);
    const now = Date.now();
    await addHold({ account: account.address, bytes: 100_000, createdAt: now, gateway: "host/another-gateway", expiresAt: now + 60_000 });
    // A multipart upload's parts: a lasting hold, made by the dead process too.
    const parts = await dead.spaceHold(account.address, client.did);
    await sql.tx(async (tx) => {
      await parts.lock(tx);
      await parts.set(tx, 200_000, now + 86_400_000, null);
    });
    expect((await client.space()).SizeByte).toBe(200_000);

    const restarted = createMeter({ sql, records: gw.quota!.records, storedBytes: nothingStored, gateway: "host/restarted-gateway" });
    expect(await restarted.clearOwn()).toBe(2); // the upload's space and traffic
    expect((await holdsOf(account.address)).map((h) => `${h.kind} ${h.gateway}`).sort()).toEqual(["space host/another-gateway", "space lasting"]);
    expect((await client.space()).SizeByte).toBe(700_000);
    expect(await statusOf(client.upload("dfs", random(700_000), { name: "fits-at-once" }))).toBe(200);
  });
});
