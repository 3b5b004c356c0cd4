/**
 * The space pool's "stored" is one row per DID (`stored_totals`), kept by triggers on `files`
 * (migration 0023 / pg 0013) instead of a SUM over every file of the account. These tests hold it
 * to that SUM: after every path that writes or deletes a file row (uploads on both back-ends,
 * replaces by name, deletes, the S3 API's PutObject, CopyObject, multipart and deletes), under
 * parallel writers on two gateways sharing one database, at the pool's edge (as many 402s as
 * must be, no more, no fewer), and on a database upgraded with rows written before the counter
 * existed. Both passes (SQLite, PostgreSQL) run it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { S3Client, SQL } from "bun";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { Sha256 } from "@aws-crypto/sha256-js";
import { SignatureV4 } from "@smithy/signature-v4";
import type { MigrationMeta } from "drizzle-orm/migrator";
import { embeddedMigrations } from "../../src/db/migrations.macro.ts";
import { openDatabase } from "../../src/db/open.ts";
import { embeddedPgMigrations } from "../../src/db/pg/migrations.macro.ts";
import { openPostgres } from "../../src/db/postgres.ts";
import type { Queryable, Sql } from "../../src/db/sql.ts";
import { canonicalDid } from "../../src/identity/did.ts";
import { findAccessKey } from "../../src/keys/index.ts";
import { startS3Api } from "../../src/s3api/index.ts";
import { keysClient } from "../../src/sdk/keys.ts";
import { createDirectStorage } from "../../src/storage/direct.ts";
import { storedBytes } from "../../src/storage/files.ts";
import { statusOf } from "../support/app.ts";
import { TEST_DB, testDatabase, testDatabaseUrl } from "../support/db.ts";
import { BASE, testGateway } from "../support/storage.ts";
import { tempDir } from "../support/tmp.ts";
import { granter } from "./grants.ts";

const MiB = 1024 * 1024;
const gw = await testGateway({ quota: true });
const gw2 = gw.another();
const grant = granter(gw.chain);
const sql = gw.database.sql;
const direct = createDirectStorage({ sql, log: gw.log, maxBody: gw.config.maxBody, backends: gw.backends, meter: gw.quota?.meter });
const s3 = await startS3Api({
  hostname: "127.0.0.1",
  port: 0,
  maxBody: gw.config.maxBody,
  log: gw.log,
  sql,
  chainId: gw.config.chainId,
  direct,
  findAccessKey: (id) => findAccessKey({ sql, secretsKey: gw.secrets.secretsKey, resolver: gw.resolver, chainId: gw.config.chainId }, id),
});
afterAll(() => s3.stop());

const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));

const TOTAL = "SELECT bytes AS n FROM stored_totals WHERE did = $1";
const SUM = "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) AS n FROM files WHERE did = $1";
const ALL_TOTALS = "SELECT did, bytes AS n FROM stored_totals";
const ALL_SUMS = "SELECT did, CAST(SUM(size) AS BIGINT) AS n FROM files GROUP BY did";

const totalOf = async (q: Queryable, did: string) => (await q.get<{ n: number }>(TOTAL, [did]))?.n ?? 0;
const sumOf = async (q: Queryable, did: string) => (await q.get<{ n: number }>(SUM, [did]))?.n ?? 0;

/** Every DID's counter against its SUM, zeros left out (a DID whose files are all gone keeps a 0 row). */
async function everyTotal(q: Queryable) {
  const nonzero = (rows: { did: string; n: number }[]) => Object.fromEntries(rows.filter((r) => r.n !== 0).map((r) => [r.did, r.n]));
  return { totals: nonzero(await q.all(ALL_TOTALS)), sums: nonzero(await q.all(ALL_SUMS)) };
}

/** A new account with free quota, its canonical DID, and an S3 key of its own. */
async function account(space: number) {
  const { account, client } = await gw.user();
  await grant(account.address, "space", space);
  await grant(account.address, "traffic", 1024 * MiB);
  const key = await keysClient({ baseUrl: BASE, store: client, fetch: gw.fetch }).create({ access: "rw", bucket: "*" });
  return { account, client, key, did: canonicalDid(account.address, gw.config.chainId) };
}

type Minted = { accessKeyId: string; secretAccessKey: string };
const bucketClient = (key: Minted, bucket = "dfs") => new S3Client({ accessKeyId: key.accessKeyId, secretAccessKey: key.secretAccessKey, endpoint: s3.url, bucket, region: "us-east-1" });

/** A request signed by hand (AWS's signer): CopyObject and DeleteObjects, which S3Client does not send. */
async function signed(key: Minted, method: string, path: string, o: { query?: Record<string, string>; body?: string; headers?: Record<string, string> } = {}) {
  const url = new URL(path, s3.url);
  const signer = new SignatureV4({ service: "s3", region: "us-east-1", credentials: key, sha256: Sha256, uriEscapePath: false });
  const body = o.body ?? "";
  const req = await signer.sign({ method, protocol: "http:", hostname: url.hostname, port: Number(url.port), path: url.pathname, query: o.query ?? {}, headers: { host: url.host, "x-amz-content-sha256": createHash("sha256").update(body).digest("hex"), ...o.headers }, body });
  const qs = new URLSearchParams(o.query ?? {}).toString();
  return fetch(`${s3.url}${url.pathname}${qs ? `?${qs}` : ""}`, { method, headers: req.headers as Record<string, string>, body: method === "GET" || method === "HEAD" ? undefined : body });
}

describe("the counter is the SUM", () => {
  test("after every step of uploads on both back-ends, replaces by name, deletes, and the S3 API's PutObject, CopyObject, multipart and deletes", async () => {
    const SPACE = 64 * MiB;
    const { client, key, did } = await account(SPACE);
    const other = await account(SPACE); // interleaved: each DID's row counts its own files only
    const c = bucketClient(key);
    let expected = 0;
    const step = async (what: string, delta: number, run: () => Promise<unknown>) => {
      await run();
      expected += delta;
      expect({ what, total: await totalOf(sql, did), sum: await sumOf(sql, did) }).toEqual({ what, total: expected, sum: expected });
      expect((await client.space()).SizeByte).toBe(SPACE - expected);
    };
    let first = 0;
    await step("dfs upload", 1000, async () => (first = (await client.upload("dfs", random(1000), { name: "a" })).ID));
    await step("ipfs upload, same name", 2000, () => client.upload("ipfs", random(2000), { name: "a" }));
    await step("other account's upload", 0, () => other.client.upload("dfs", random(777), { name: "a" }));
    await step("dfs replace by name, smaller", -500, () => client.upload("dfs", random(500), { name: "a" }));
    await step("ipfs replace by name, larger", 500, () => client.upload("ipfs", random(2500), { name: "a" }));
    const replacedId = first;
    await step("the replaced id is gone: its delete changes nothing", 0, async () => expect(await statusOf(client.delete(replacedId))).toBe(404));
    const a = (await client.list("dfs")).Object.find((f) => f.Name === "a")!;
    await step("dfs delete", -500, () => client.delete(a.ID));
    await step("S3 PutObject", 3000, () => c.write("s3/x", random(3000)));
    await step("S3 PutObject over it", -2900, () => c.write("s3/x", random(100)));
    await step("CopyObject within dfs", 100, async () => expect((await signed(key, "PUT", "/dfs/s3/y", { headers: { "x-amz-copy-source": "/dfs/s3/x" } })).status).toBe(200));
    await step("CopyObject across to ipfs", 100, async () => expect((await signed(key, "PUT", "/ipfs/copied", { headers: { "x-amz-copy-source": "dfs/s3/x" } })).status).toBe(200));
    await step("S3 PutObject of 40", 40, () => c.write("s3/z", random(40)));
    await step("CopyObject onto an existing name", 60, async () => expect((await signed(key, "PUT", "/dfs/s3/z", { headers: { "x-amz-copy-source": "/dfs/s3/x" } })).status).toBe(200));
    await step("multipart, 2 parts", 5 * MiB + 7, async () => {
      const writer = c.file("s3/multi").writer({ partSize: 5 * MiB });
      writer.write(random(5 * MiB + 7));
      await writer.end();
    });
    await step("S3 DeleteObject", -100, () => c.delete("s3/x"));
    await step("S3 DeleteObject of a missing key", 0, () => c.delete("s3/none"));
    await step("S3 DeleteObjects", -(5 * MiB + 7) - 100, async () => {
      const doc = "<Delete><Object><Key>s3/multi</Key></Object><Object><Key>s3/y</Key></Object><Object><Key>s3/none</Key></Object></Delete>";
      const res = await signed(key, "POST", "/dfs", { query: { delete: "" }, body: doc, headers: { "content-md5": createHash("md5").update(doc).digest("base64") } });
      expect(res.status).toBe(200);
    });
    expect(await totalOf(sql, other.did)).toBe(777);
    // Left: ipfs "a" (2500), ipfs "copied" (100), dfs "s3/z" (100).
    expect(expected).toBe(2700);
    const everything = await everyTotal(sql);
    expect(everything.totals).toEqual(everything.sums);
  }, 60_000);
});

describe("parallel writers", () => {
  test("at the pool's edge, with files already stored: exactly as many uploads as fit, the rest 402", async () => {
    const FILE = 10_000;
    const FIRST = 50_000; // grants add up: this one, then a top-up to the edge below
    const { account: a, client, did } = await account(FIRST);
    // Files from before, some replaced and one deleted, so the counter (not a fresh zero) decides.
    for (let i = 0; i < 30; i++) await client.upload("dfs", random(1000 + i), { name: `old${i}` });
    for (let i = 0; i < 5; i++) await client.upload("dfs", random(500), { name: `old${i}` });
    await client.delete((await client.list("dfs")).Object.find((f) => f.Name === "old29")!.ID);
    const stored = await sumOf(sql, did);
    expect(await totalOf(sql, did)).toBe(stored);
    // Room for exactly 20 more files, and part of one.
    await grant(a.address, "space", stored + 20 * FILE + FILE / 2 - FIRST);
    expect((await client.space()).SizeByte).toBe(20 * FILE + FILE / 2);
    const s = await gw.session(a);
    const requests = await Promise.all(Array.from({ length: 50 }, (_, i) => gw.uploadRequest(s, { requestID: i + 1, bytes: random(FILE), name: `new${i}` })));
    const statuses = (await Promise.all(requests.map((r, i) => (i % 2 ? gw2 : gw).app.handle(r)))).map((r) => r.status);
    expect(statuses.filter((st) => st === 200)).toHaveLength(20);
    expect(statuses.filter((st) => st === 402)).toHaveLength(30);
    expect(await totalOf(sql, did)).toBe(stored + 20 * FILE);
    expect(await sumOf(sql, did)).toBe(stored + 20 * FILE);
    expect((await client.space()).SizeByte).toBe(FILE / 2);
  }, 60_000);

  test("uploads, replaces and deletes of one account at once, on two gateways: the counter ends equal to the SUM", async () => {
    const { account: a, client, key, did } = await account(64 * MiB);
    const c = bucketClient(key);
    const files = [];
    for (let i = 0; i < 20; i++) files.push(await client.upload("dfs", random(100 + i), { name: `f${i}` }));
    const s = await gw.session(a);
    const uploads = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        // Even: new names; odd: replacing f0…f14 (which the deletes below race with).
        gw.uploadRequest(s, { requestID: i + 1, bytes: random(200 + i), name: i % 2 ? `f${(i - 1) / 2}` : `n${i}` }),
      ),
    );
    const results = await Promise.all([
      ...uploads.map(async (r, i) => (await (i % 2 ? gw2 : gw).app.handle(r)).status),
      // Deletes take no quota lock: they race with each other and with the uploads' writes of the
      // same counter row (S3 DeleteObject: no session's requestIDs to put them in a row).
      ...files.map((f) => c.delete(f.Name).then(() => 200)),
    ]);
    for (const st of results) expect([200, 404]).toContain(st);
    expect(await totalOf(sql, did)).toBe(await sumOf(sql, did));
    const listed = (await client.list("dfs")).Object.reduce((n, f) => n + f.Size, 0);
    expect(await totalOf(sql, did)).toBe(listed);
    expect((await client.space()).SizeByte).toBe(64 * MiB - listed);
  }, 60_000);
});

describe("parallel statements", () => {
  test("inserts and deletes of one DID's rows on many connections at once, as many gateways send them: no update lost", async () => {
    const { sql: q, close } = testDatabase(tempDir("parallel"));
    try {
      await q.run("INSERT INTO buckets (did, created_at) VALUES ('did:p', 0)");
      const insert = (name: string, size: number) => q.run("INSERT INTO files (did, backend, name, cid, size, mod_time) VALUES ('did:p', 'dfs', $1, 'bafy', $2, 0)", [name, size]);
      for (let i = 0; i < 40; i++) await insert(`old${i}`, 100 + i);
      // Each statement commits alone (no quota lock): on PostgreSQL they overlap on the pool's connections.
      await Promise.all([
        ...Array.from({ length: 40 }, (_, i) => q.run("DELETE FROM files WHERE did = 'did:p' AND name = $1", [`old${i}`])),
        ...Array.from({ length: 40 }, (_, i) => insert(`new${i}`, 1000 + i)),
      ]);
      expect(await totalOf(q, "did:p")).toBe(40 * 1000 + (39 * 40) / 2);
      expect(await totalOf(q, "did:p")).toBe(await sumOf(q, "did:p"));
    } finally {
      await close();
    }
  });
});

describe("upgrade", () => {
  /** The migrations before the counter's (each dialect's history, up to the one that creates it). */
  const before = (all: MigrationMeta[]) => all.slice(0, all.findIndex((m) => m.sql.some((s) => s.includes('TABLE `stored_totals`') || s.includes('TABLE "stored_totals"'))));
  const BUCKET = "INSERT INTO buckets (did, created_at) VALUES ($1, 0)";
  const FILE = "INSERT INTO files (did, backend, name, cid, size, mod_time) VALUES ($1, $2, $3, 'bafy', $4, 0)";
  /** Rows as a gateway of the previous version writes them: two DIDs, one with nothing left. */
  async function oldRows(q: Queryable) {
    for (const d of ["did:a", "did:b", "did:gone"]) await q.run(BUCKET, [d]);
    for (let i = 0; i < 25; i++) await q.run(FILE, ["did:a", i % 2 ? "dfs" : "ipfs", `f${i}`, 1000 * i + 1]);
    await q.run(FILE, ["did:b", "dfs", "only", 123]);
    await q.run(FILE, ["did:gone", "dfs", "x", 5]);
    await q.run("DELETE FROM files WHERE did = 'did:gone'");
  }
  const A = Array.from({ length: 25 }, (_, i) => 1000 * i + 1).reduce((x, y) => x + y, 0);

  /** What the upgraded database must say, then keep saying as rows change. */
  async function expectExact(q: Sql) {
    expect(await totalOf(q, "did:a")).toBe(A);
    expect(await totalOf(q, "did:b")).toBe(123);
    expect(await totalOf(q, "did:gone")).toBe(0);
    expect(await storedBytes(q, "did:a")).toBe(A);
    expect(await storedBytes(q, "did:a", { backend: "dfs", name: "f3" })).toBe(A - 3001);
    expect(await storedBytes(q, "did:a", { backend: "ipfs", name: "f3" })).toBe(A); // no such entry
    await q.run(FILE, ["did:gone", "dfs", "back", 7]);
    await q.run("DELETE FROM files WHERE did = 'did:a' AND name = 'f24'");
    expect(await totalOf(q, "did:gone")).toBe(7);
    expect(await totalOf(q, "did:a")).toBe(A - 24_001);
    const everything = await everyTotal(q);
    expect(everything.totals).toEqual(everything.sums);
  }

  // A SQLite file of its own, whatever this pass's database: it runs in every pass.
  test("SQLite: rows written before the migration are counted by it", async () => {
    const file = join(tempDir("upgrade"), "stowage.db");
    const old = openDatabase(file, before(embeddedMigrations()));
    await oldRows(old.sql);
    old.close();
    const upgraded = openDatabase(file);
    try {
      await expectExact(upgraded.sql);
    } finally {
      upgraded.close();
    }
  });

  // Registered in the PostgreSQL pass only (a test skipped elsewhere would count as skipped).
  if (TEST_DB === "postgres") test("PostgreSQL: rows written before the migration, and by a previous-version gateway while it runs, are counted", async () => {
    const url = await testDatabaseUrl();
    const all = embeddedPgMigrations();
    const old = await openPostgres(url, { max: 2, migrations: before(all) });
    await oldRows(old.sql);
    // A gateway of the previous version, mid-transaction when the upgrade starts: the migration
    // waits for it (its lock on files), then counts its row.
    const writer = await old.client.reserve();
    await writer.unsafe("BEGIN");
    await writer.unsafe("INSERT INTO files (did, backend, name, cid, size, mod_time) VALUES ('did:b', 'dfs', 'late', 'bafy', 1000000, 0)");
    const upgrading = openPostgres(url, { max: 2 });
    // Until the upgrade is seen waiting for a lock (polled from a third connection, not slept on).
    const watcher = new SQL(url, { max: 1 });
    for (let waited = false; !waited; ) {
      const rows = await watcher.unsafe("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'");
      waited = rows.length > 0;
    }
    await writer.unsafe("COMMIT");
    writer.release();
    const upgraded = await upgrading;
    try {
      expect(upgraded.migrated).toBe(all.length - before(all).length); // the counter's, and any after it
      expect(await totalOf(upgraded.sql, "did:b")).toBe(123 + 1_000_000);
      await old.sql.run("DELETE FROM files WHERE did = 'did:b' AND name = 'late'"); // the previous version deletes
      await expectExact(upgraded.sql);
    } finally {
      await watcher.close();
      await old.close();
      await upgraded.close();
    }
  });
});
