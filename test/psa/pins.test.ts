/**
 * The Pinning Service API's pins, end to end in one process with real parts: the gateway's Helia
 * node fetches each pin's DAG over bitswap (TCP) from a second node named in `origins`, the quota
 * meter of the chain's records holds and charges it, and the pin lands as a file of the account's
 * ipfs files. Also: a pin that does not fit, or cannot be fetched in time, fails and keeps nothing;
 * rows in flight survive a dead gateway and are worked by one gateway at a time; the list's filters.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { multiaddr } from "@multiformats/multiaddr";
import { CID } from "multiformats/cid";
import { ContentBlocked } from "../../src/denylist/index.ts";
import { parseDidOrAddress } from "../../src/identity/did.ts";
import { createPins, type PinBackend } from "../../src/pins/index.ts";
import { publicOrigin } from "../../src/pins/origins.ts";
import { blockKey } from "../../src/storage/ipfs/index.ts";
import type { IpfsBackend } from "../../src/storage/ipfs/index.ts";
import { storedBytes } from "../../src/storage/files.ts";
import { keysClient } from "../../src/sdk/keys.ts";
import { readJson, type Json } from "../support/app.ts";
import { BASE, testGateway } from "../support/storage.ts";
import { until } from "../support/until.ts";
import { granter } from "../quota/grants.ts";
import { originNode, randomBytes, sha256 } from "./support.ts";

const gw = await testGateway({ quota: true, env: { STOWAGE_PIN_ORIGINS: "any", STOWAGE_PIN_TIMEOUT: "3s" } });
const grant = granter(gw.chain);
const origin = await originNode();
const pins = gw.composed.pins;
pins.worker.start();
afterAll(() => pins.worker.stop());
const ipfs = gw.backends.ipfs as IpfsBackend;
const sql = gw.database.sql;
const MiB = 1024 * 1024;

async function account(space = 64 * MiB) {
  const { account, client } = await gw.user();
  if (space > 0) {
    await grant(account.address, "space", space);
    await grant(account.address, "traffic", 1024 * MiB);
  }
  const minted = await keysClient({ baseUrl: BASE, store: client, fetch: gw.fetch }).create({ scope: "pins" });
  return { did: parseDidOrAddress(account.address, gw.chain.context.chain.id), token: minted.token as string };
}

const psa = (token: string, method: string, path: string, body?: unknown) =>
  gw.app.handle(new Request(`${BASE}/psa${path}`, { method, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) }));

async function pin(token: string, body: Record<string, unknown>): Promise<Json> {
  const res = await psa(token, "POST", "/pins", body);
  expect(res.status).toBe(202);
  return readJson(res);
}

/** The pin once it is pinned or failed. */
const settled = (token: string, id: string, ms = 20_000) =>
  until(`pin ${id} settled`, async () => readJson(await psa(token, "GET", `/pins/${id}`)), (s: Json) => s.status === "pinned" || s.status === "failed", ms, 50);

const reservations = async (address: string) => Number((await sql.get<{ n: number }>("SELECT COUNT(*) AS n FROM quota_reservations WHERE account = $1", [address]))?.n ?? 0);

describe("a pin", () => {
  test("fetches the DAG from its origin, verifies it, and lands as an ipfs file under its name", async () => {
    const me = await account();
    const bytes = randomBytes(MiB + 12345);
    const cid = await origin.add(bytes);
    expect(cid).toStartWith("Qm");
    const made = await pin(me.token, { cid, name: "photo.bin", origins: origin.addrs(), meta: { app: "psa-test" } });
    expect(made).toMatchObject({ status: "queued", pin: { cid, name: "photo.bin", origins: origin.addrs(), meta: { app: "psa-test" } } });
    expect(made.delegates.length).toBeGreaterThan(0);
    for (const d of made.delegates) expect(d).toContain(`/p2p/${ipfs.peerId}`);
    const done = await settled(me.token, made.requestid);
    expect(done).toMatchObject({ requestid: made.requestid, status: "pinned", created: made.created, pin: { cid, name: "photo.bin" } });

    // A file of the account's ipfs files: the client's Cid (as CIDv1), the file's own size, its bytes.
    const file = await gw.composed.direct.named(me.did, "ipfs", "photo.bin");
    expect(file).toMatchObject({ cid: CID.parse(cid).toV1().toString(), size: bytes.byteLength });
    expect(sha256(await Bun.readableStreamToBytes(ipfs.read(CID.parse(cid).toV1().toString())))).toBe(sha256(bytes));
    expect(await storedBytes(sql, me.did.canonical)).toBe(bytes.byteLength);
    expect(await reservations(me.did.address)).toBe(0);
  });

  test("without a name is named by its Cid; a directory pins whole", async () => {
    const me = await account();
    const cid = await origin.addDirectory();
    const done = await settled(me.token, (await pin(me.token, { cid, origins: origin.addrs() })).requestid);
    expect(done.status).toBe("pinned");
    const file = await gw.composed.direct.named(me.did, "ipfs", cid);
    expect(file?.cid).toBe(CID.parse(cid).toV1().toString());
    expect(file?.size).toBeGreaterThan(3000);
  });

  test("that does not fit fails with INSUFFICIENT_FUNDS and keeps and charges nothing", async () => {
    const me = await account(300 * 1024);
    const cid = await origin.add(randomBytes(2 * MiB));
    const done = await settled(me.token, (await pin(me.token, { cid, name: "big.bin", origins: origin.addrs() })).requestid);
    expect(done.status).toBe("failed");
    expect(done.info.status_details).toStartWith("INSUFFICIENT_FUNDS: ");
    expect(await gw.composed.direct.named(me.did, "ipfs", "big.bin")).toBeUndefined();
    expect(await storedBytes(sql, me.did.canonical)).toBe(0);
    expect(await reservations(me.did.address)).toBe(0);
    // The blocks that came in before the refusal are gone again.
    expect(await gw.blobs.store.stat(blockKey(CID.parse(cid)))).toBeUndefined();
  });

  test("that cannot be fetched fails once its time is up, keeping nothing", async () => {
    const me = await account();
    const absent = (await origin.add(randomBytes(100))).toString();
    // Another node's content, named without origins: nobody connected has it.
    const stranger = CID.parse("bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy");
    const began = Date.now();
    const done = await settled(me.token, (await pin(me.token, { cid: stranger.toString() })).requestid);
    expect(done).toMatchObject({ status: "failed", info: { status_details: expect.stringMatching(/^TIMEOUT: /) } });
    expect(Date.now() - began).toBeGreaterThanOrEqual(2_900);
    expect(await gw.composed.direct.named(me.did, "ipfs", stranger.toString())).toBeUndefined();
    expect(absent).toBeString();
  });

  test("replaced gets a new requestid; removed is gone, and a removed pin in flight keeps nothing", async () => {
    const me = await account();
    const first = await pin(me.token, { cid: await origin.add(randomBytes(500)), origins: origin.addrs() });
    const second = await readJson(await psa(me.token, "POST", `/pins/${first.requestid}`, { cid: await origin.add(randomBytes(600)), name: "second.bin", origins: origin.addrs() }));
    expect(second.requestid).not.toBe(first.requestid);
    expect((await psa(me.token, "GET", `/pins/${first.requestid}`)).status).toBe(404);
    expect((await settled(me.token, second.requestid)).status).toBe("pinned");

    const stuck = await pin(me.token, { cid: "bafkreihwsnuregceqh263vgdathcprnbvatyat6h6mu7ipjhhodcdbyhoy", name: "never.bin" });
    await until("pinning", async () => (await readJson(await psa(me.token, "GET", `/pins/${stuck.requestid}`))).status, (s) => s === "pinning", 5_000);
    expect((await psa(me.token, "DELETE", `/pins/${stuck.requestid}`)).status).toBe(202);
    expect((await psa(me.token, "GET", `/pins/${stuck.requestid}`)).status).toBe(404);
    expect((await psa(me.token, "DELETE", `/pins/${stuck.requestid}`)).status).toBe(404);
    // Its time runs out with nobody's row to write: still gone, no file.
    await Bun.sleep(3_500);
    expect((await psa(me.token, "GET", `/pins/${stuck.requestid}`)).status).toBe(404);
    expect(await gw.composed.direct.named(me.did, "ipfs", "never.bin")).toBeUndefined();
  });

  test("of content the gateway refuses to store is refused at once, or fails with CONTENT_BLOCKED before any block is fetched", async () => {
    const me = await account();
    const cid = await origin.add(randomBytes(2000));
    const root = CID.parse(cid).toV1().toString();
    const asked: string[] = [];
    let blocking = false;
    const refusing = createPins({
      sql,
      log: gw.log,
      chainId: gw.chain.context.chain.id,
      findToken: gw.keys.findPins,
      storage: gw.composed.direct,
      holder: "refusing",
      ipfs: () => ({ ...ipfs, multiaddrs: () => ipfs.multiaddrs(), dial: ipfs.dial, putDag: ipfs.putDag, fetchBlock: (c: CID, signal: AbortSignal) => (asked.push(c.toString()), ipfs.fetchBlock(c, signal)) }),
      settings: { pinTimeout: 10_000, pinQueue: 100, pinOrigins: "any" },
      // The denylist's refusal of a write, as compose wires it.
      refuse: (c) => {
        if (blocking && c === root) throw new ContentBlocked(c, true);
      },
    });
    await pins.worker.stop();
    try {
      // Blocked after it was queued (a list that changed meanwhile): the worker refuses it.
      const made = await refusing.add(me.did, { cid, name: "blocked.bin", origins: origin.addrs() });
      blocking = true;
      refusing.worker.start();
      const done = await settled(me.token, made.requestid);
      expect(done).toMatchObject({ status: "failed", info: { status_details: expect.stringMatching(/^CONTENT_BLOCKED: /) } });
      expect(asked).toEqual([]);
      expect(await gw.composed.direct.named(me.did, "ipfs", "blocked.bin")).toBeUndefined();
      // Blocked already: refused when it is asked for, 410.
      expect(await refusing.add(me.did, { cid }).catch((e: unknown) => e)).toMatchObject({ reason: "CONTENT_BLOCKED", status: 410 });
    } finally {
      await refusing.worker.stop();
      pins.worker.start();
    }
  });

  test("another account's token sees none of it", async () => {
    const me = await account();
    const other = await account();
    const made = await pin(me.token, { cid: await origin.add(randomBytes(100)), origins: origin.addrs() });
    expect((await psa(other.token, "GET", `/pins/${made.requestid}`)).status).toBe(404);
    expect((await psa(other.token, "DELETE", `/pins/${made.requestid}`)).status).toBe(404);
    expect((await readJson(await psa(other.token, "GET", "/pins?status=queued,pinning,pinned,failed"))).count).toBe(0);
  });
});

describe("pins in flight", () => {
  test("a pin a dead gateway was working is taken over once its lease lapsed; a live lease is not", async () => {
    const me = await account();
    const cid = await origin.add(randomBytes(5000));
    const now = Date.now();
    const row = (id: string, until: number) =>
      sql.run(
        `INSERT INTO pin_requests (id, did, cid, root, name, origins, meta, status, details, created_at, updated_at, lease_holder, lease_until)
         VALUES ($1, $2, $3, $4, $5, $6, '{}', 'pinning', NULL, $7, $7, 'gone-gateway', $8)`,
        [id, me.did.canonical, cid, CID.parse(cid).toV1().toString(), id, JSON.stringify(origin.addrs()), now, until],
      );
    await row("dead-lease", now - 1);
    await row("live-lease", now + 60_000);
    await until("taken over", async () => (await readJson(await psa(me.token, "GET", "/pins/dead-lease"))).status, (s) => s === "pinned", 10_000, 100);
    expect((await readJson(await psa(me.token, "GET", "/pins/live-lease"))).status).toBe("pinning");
    expect(await gw.composed.direct.named(me.did, "ipfs", "dead-lease")).toBeDefined();
  });

  test("a gateway that starts again takes up at once the pins its previous process was working", async () => {
    const me = await account();
    const cid = await origin.add(randomBytes(4000));
    const now = Date.now();
    await sql.run(
      `INSERT INTO pin_requests (id, did, cid, root, name, origins, meta, status, details, created_at, updated_at, lease_holder, lease_until)
       VALUES ('own-lease', $1, $2, $3, 'own-lease', $4, '{}', 'pinning', NULL, $5, $5, 'restarted-gateway', $6)`,
      [me.did.canonical, cid, CID.parse(cid).toV1().toString(), JSON.stringify(origin.addrs()), now, now + 60_000],
    );
    const again = createPins({ sql, log: gw.log, chainId: gw.chain.context.chain.id, findToken: gw.keys.findPins, storage: gw.composed.direct, holder: "restarted-gateway", ipfs: () => ipfs, settings: { pinTimeout: 10_000, pinQueue: 100, pinOrigins: "any" } });
    again.worker.start();
    try {
      // Well inside the 60 s its lease still had: taken up because it was this holder's own.
      expect((await settled(me.token, "own-lease", 10_000)).status).toBe("pinned");
    } finally {
      await again.worker.stop();
    }
  });

  test("two gateways' workers over one database work each pin once", async () => {
    const me = await account();
    const counted = (b: PinBackend, calls: string[]) => ({ ...b, multiaddrs: () => b.multiaddrs(), fetchBlock: b.fetchBlock, dial: b.dial, putDag: (root: CID, walk: Parameters<PinBackend["putDag"]>[1]) => (calls.push(root.toString()), b.putDag(root, walk)) });
    const calls: [string[], string[]] = [[], []];
    const base = { sql, log: gw.log, chainId: gw.chain.context.chain.id, findToken: gw.keys.findPins, storage: gw.composed.direct, settings: { pinTimeout: 10_000, pinQueue: 100, pinOrigins: "any" as const }, pollMs: 20 };
    const a = createPins({ ...base, holder: "gateway-a", ipfs: () => counted(ipfs, calls[0]) });
    const b = createPins({ ...base, holder: "gateway-b", ipfs: () => counted(ipfs, calls[1]) });
    await pins.worker.stop();
    a.worker.start();
    b.worker.start();
    try {
      const made = [];
      for (let i = 0; i < 8; i++) made.push(await a.add(me.did, { cid: await origin.add(randomBytes(3000 + i)), origins: origin.addrs() }));
      for (const m of made) expect((await settled(me.token, m.requestid)).status).toBe("pinned");
      expect(calls[0].length + calls[1].length).toBe(8);
      expect(new Set([...calls[0], ...calls[1]]).size).toBe(8);
    } finally {
      await a.worker.stop();
      await b.worker.stop();
      pins.worker.start();
    }
  });

  test("an account has at most its queue of pins queued or pinning", async () => {
    const me = await account();
    const small = createPins({ sql, log: gw.log, chainId: gw.chain.context.chain.id, findToken: gw.keys.findPins, storage: gw.composed.direct, holder: "idle", ipfs: () => ipfs, settings: { pinTimeout: 1000, pinQueue: 2, pinOrigins: "public" } });
    const cid = "bafkreihwsnuregceqh263vgdathcprnbvatyat6h6mu7ipjhhodcdbyhoy";
    await pins.worker.stop();
    try {
      await small.add(me.did, { cid });
      await small.add(me.did, { cid });
      const refused = await small.add(me.did, { cid }).catch((e: unknown) => e);
      expect(refused).toMatchObject({ reason: "TOO_MANY_PINS", status: 429 });
    } finally {
      await sql.run("DELETE FROM pin_requests WHERE did = $1", [me.did.canonical]);
      pins.worker.start();
    }
  });
});

describe("listing", () => {
  test("filters by cid, name and match, status, before and after, meta; newest first; count is the whole match", async () => {
    const me = await account();
    const names = ["Report.PDF", "report-2.pdf", "notes.txt"];
    const made: Json[] = [];
    for (const [i, name] of names.entries()) {
      made.push(await pin(me.token, { cid: await origin.add(randomBytes(200 + i)), name, origins: origin.addrs(), meta: { app: i < 2 ? "docs" : "notes", n: String(i) } }));
      await Bun.sleep(5); // distinct `created`
    }
    for (const m of made) await settled(me.token, m.requestid);
    const list = async (query: string) => {
      const res = await psa(me.token, "GET", `/pins${query}`);
      expect(res.status).toBe(200);
      const body = await readJson(res);
      return { count: body.count as number, names: (body.results as Json[]).map((r) => r.pin.name) };
    };
    expect(await list("")).toEqual({ count: 3, names: ["notes.txt", "report-2.pdf", "Report.PDF"] });
    expect(await list("?limit=1")).toEqual({ count: 3, names: ["notes.txt"] });
    expect(await list(`?cid=${made[0].pin.cid},${CID.parse(made[1].pin.cid).toV1()}`)).toEqual({ count: 2, names: ["report-2.pdf", "Report.PDF"] });
    expect(await list("?name=report.pdf")).toEqual({ count: 0, names: [] });
    expect(await list("?name=report.pdf&match=iexact")).toEqual({ count: 1, names: ["Report.PDF"] });
    expect(await list("?name=PDF&match=partial")).toEqual({ count: 1, names: ["Report.PDF"] });
    expect(await list("?name=PDF&match=ipartial")).toEqual({ count: 2, names: ["report-2.pdf", "Report.PDF"] });
    expect(await list(`?meta=${encodeURIComponent(JSON.stringify({ app: "docs" }))}`)).toEqual({ count: 2, names: ["report-2.pdf", "Report.PDF"] });
    expect(await list(`?meta=${encodeURIComponent(JSON.stringify({ app: "docs", n: "1" }))}`)).toEqual({ count: 1, names: ["report-2.pdf"] });
    expect(await list(`?before=${made[2].created}`)).toEqual({ count: 2, names: ["report-2.pdf", "Report.PDF"] });
    expect(await list(`?after=${made[0].created}&limit=1`)).toEqual({ count: 2, names: ["notes.txt"] });
    expect(await list("?status=failed")).toEqual({ count: 0, names: [] });
    expect(await list("?status=queued,pinning,pinned,failed")).toMatchObject({ count: 3 });
  });
});

test("origins on loopback and private addresses are not dialled by default", () => {
  for (const a of ["/ip4/127.0.0.1/tcp/4001", "/ip4/10.1.2.3/tcp/1", "/ip4/192.168.1.1/tcp/1", "/ip4/172.20.0.1/tcp/1", "/ip4/169.254.1.1/tcp/1", "/ip6/::1/tcp/1", "/ip6/fd00::1/tcp/1", "/ip6/fe80::1/tcp/1", "/dns4/localhost/tcp/1"]) expect({ a, ok: publicOrigin(multiaddr(a)) }).toEqual({ a, ok: false });
  for (const a of ["/ip4/203.0.113.7/tcp/4001", "/ip4/8.8.8.8/udp/4001/quic-v1", "/ip6/2001:db8::1/tcp/1", "/dns4/node.example.org/tcp/4001"]) expect({ a, ok: publicOrigin(multiaddr(a)) }).toEqual({ a, ok: true });
});
