/**
 * Who pays for the trustless gateway's reads (D17): the operator, from each owner's daily
 * allowance counted in the shared database (so every gateway of a cluster spends from one), never
 * the owner's traffic pool; and each gateway limits the bytes one client address (IPv6: its /64)
 * may take per hour. Over either: 429 with Retry-After, and nothing counted for what was refused.
 */
import { describe, expect, test } from "bun:test";
import * as dagPb from "@ipld/dag-pb";
import type { CID } from "multiformats/cid";
import { clientKey } from "../../src/http/client-key.ts";
import { randomBytes, trustlessGateway } from "./support.ts";

const MiB = 1024 * 1024;
const tg = await trustlessGateway();

/** A public 3 MiB (+ a bit) file of a new owner, with its leaves (in file order). */
async function publicFile() {
  const owner = await tg.user();
  const content = randomBytes(3 * MiB + 500);
  const file = await tg.publish(owner, content, { name: "public.bin" });
  const { readBlock } = await import("../../src/storage/ipfs/blocks.ts");
  const { CID: Cid } = await import("multiformats/cid");
  const leaves = dagPb.decode(await readBlock(tg.store, Cid.parse(file.Cid))).Links.map((l) => l.Hash);
  return { owner, content, file, leaves };
}

const rawOf = (url: string, cid: CID | string, client = "192.0.2.1") => fetch(`${url}/ipfs/${cid}?format=raw`, { headers: { "x-forwarded-for": client } });

/** Bytes of `owner`'s allowance spent today, as the database holds them. */
const spent = async (owner: string) =>
  (await tg.sql.get<{ n: number }>("SELECT CAST(COALESCE(SUM(bytes), 0) AS BIGINT) AS n FROM public_egress WHERE owner = $1", [owner]))?.n ?? 0;

/** The owner's traffic pool as the quota and voucher records hold it (D6, D7). */
async function pool(owner: string) {
  const traffic = await tg.sql.get<{ n: number }>("SELECT CAST(COALESCE(SUM(bytes), 0) AS BIGINT) AS n FROM traffic_usage WHERE account = $1", [owner]);
  const voucher = await tg.sql.get<{ used: number }>("SELECT used FROM voucher_counters WHERE payer = $1", [owner]);
  return { traffic: traffic?.n ?? 0, voucher: voucher?.used ?? 0 };
}

async function expect429(res: Response, maxRetryAfter: number) {
  expect(res.status).toBe(429);
  const retry = Number(res.headers.get("retry-after"));
  expect(retry).toBeGreaterThan(0);
  expect(retry).toBeLessThanOrEqual(maxRetryAfter);
  expect(((await res.json()) as { Code: string }).Code).toBe("RateLimited");
}

describe("the owner's daily allowance", () => {
  test("exhausted → 429 until the next UTC day; the owner's traffic pool is untouched", async () => {
    const { owner, file, leaves } = await publicFile();
    const { url, sent } = await tg.serve({ allowance: MiB + MiB / 2 });
    const before = await pool(owner.address);

    const first = await rawOf(url, leaves[0] as CID);
    expect(first.status).toBe(200);
    expect((await first.arrayBuffer()).byteLength).toBe(MiB);
    expect(await spent(owner.address)).toBe(MiB);
    expect(sent.bytes).toBe(MiB); // what the metrics hear of
    await expect429(await rawOf(url, leaves[1] as CID), 86_400);
    expect(await spent(owner.address)).toBe(MiB); // the refused read counted nothing

    // A CAR starts (its header and root fit) and is cut at the first leaf that does not.
    const car = await fetch(`${url}/ipfs/${file.Cid}?format=car`);
    expect(car.status).toBe(200);
    const cut = await car.arrayBuffer().then(
      (b) => b.byteLength,
      () => "cut" as const,
    );
    expect(cut === "cut" || cut < MiB).toBe(true);
    const after = await spent(owner.address);
    expect(after).toBeGreaterThan(MiB);
    expect(after).toBeLessThanOrEqual(MiB + MiB / 2);

    // None of it came from the owner's pool, which a download of theirs does use.
    expect(await pool(owner.address)).toEqual(before);
    const own = await owner.store.download("ipfs", file.Cid, { range: [0, 999] });
    expect((await own.arrayBuffer()).byteLength).toBe(1000);
    const mine = await pool(owner.address);
    expect(mine.traffic).toBeGreaterThan(before.traffic);
  });

  test("a new UTC day starts a new allowance", async () => {
    const { owner, leaves } = await publicFile();
    let now = Date.UTC(2030, 0, 1, 23, 59, 0);
    const { url } = await tg.serve({ allowance: MiB, now: () => now });
    expect((await rawOf(url, leaves[0] as CID)).status).toBe(200);
    await expect429(await rawOf(url, leaves[1] as CID), 60);
    now += 120_000;
    const next = await rawOf(url, leaves[1] as CID);
    expect(next.status).toBe(200);
    await next.arrayBuffer();
    expect(await spent(owner.address)).toBeGreaterThanOrEqual(2 * MiB);
  });

  test("gateways of a cluster spend one allowance, and parallel reads never pass it together", async () => {
    const { owner, leaves } = await publicFile();
    const a = await tg.serve({ allowance: 3 * MiB + MiB / 2 });
    const b = await tg.serve({ allowance: 3 * MiB + MiB / 2 });
    const leaf = leaves[0] as CID;
    const statuses = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const res = await rawOf(i % 2 ? a.url : b.url, leaf);
        await res.arrayBuffer();
        return res.status;
      }),
    );
    expect(statuses.filter((s) => s === 200)).toHaveLength(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(5);
    expect(await spent(owner.address)).toBe(3 * MiB);
  });

  test("0 turns public reads off: refused, and downloads with a voucher are as before", async () => {
    const { owner, file, leaves } = await publicFile();
    const { url } = await tg.serve({ allowance: 0 });
    const res = await rawOf(url, leaves[0] as CID);
    expect(res.status).toBe(403);
    await res.arrayBuffer();
    const car = await fetch(`${url}/ipfs/${file.Cid}?format=car`);
    expect(car.status).toBe(403);
    await car.arrayBuffer();
    expect(await spent(owner.address)).toBe(0);
    const own = await owner.store.download("ipfs", file.Cid, { range: [0, 9] });
    expect((await own.arrayBuffer()).byteLength).toBe(10);
  });
});

describe("the per-client limit of a gateway", () => {
  test("counts bytes per address, IPv6 per /64; a refused read costs the owner nothing", async () => {
    const { owner, leaves } = await publicFile();
    const { url } = await tg.serve({ perClient: MiB + MiB / 2 });
    const [l0, l1] = leaves as [CID, CID];
    const ok = async (res: Response) => {
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    };
    await ok(await rawOf(url, l0, "2001:db8:1:2::1"));
    await expect429(await rawOf(url, l1, "2001:db8:1:2:ffff::9"), 3600); // same /64
    await ok(await rawOf(url, l1, "2001:db8:1:3::1")); // another /64
    await ok(await rawOf(url, l0, "198.51.100.7"));
    await expect429(await rawOf(url, l1, "::ffff:198.51.100.7"), 3600); // the same IPv4 client
    expect(await spent(owner.address)).toBe(3 * MiB);
  });

  test("client keys: IPv4 as it is, IPv6 by its /64", () => {
    expect(clientKey("198.51.100.7")).toBe("198.51.100.7");
    expect(clientKey("::ffff:198.51.100.7")).toBe("198.51.100.7");
    expect(clientKey("2001:db8:1:2::1")).toBe("2001:db8:1:2::/64");
    expect(clientKey("2001:0DB8:0001:0002:aaaa:bbbb:cccc:dddd")).toBe("2001:db8:1:2::/64");
    expect(clientKey("2001:db8::1")).toBe("2001:db8:0:0::/64");
    expect(clientKey("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
    expect(clientKey("::1")).toBe("0:0:0:0::/64");
  });
});
