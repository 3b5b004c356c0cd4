// An upload's commits (storage/service.ts `upload`): on SQLite exactly one of them
// fsyncs — the file row's — and the commit the upload made before it (the blob pins) comes
// earlier in the log, so that one fsync makes both durable before the answer; both claims, the
// content's rows and the voucher's count commit with the file row (the bytes count exactly when
// the file is stored, and a refused upload claims nothing), on PostgreSQL too. Whether a commit fsyncs is
// what the SQLite layer reports right after its COMMIT (`onCommit`: whether the transaction then
// awaits an fsync of the log); that such a transaction resolves only after that fsync is
// test/db/wal-sync.test.ts's.
// A download's voucher claim, whole or streamed, commits with an fsync before its bytes go out;
// an access key's read of a body read whole (S3 GetObject) counts its traffic in one commit.
// A power cut itself cannot be staged here.
import { describe, expect, test } from "bun:test";
import type { Param, Queryable, Sql, TxOptions } from "../../src/db/sql.ts";
import { SqliteSql } from "../../src/db/sqlite-sql.ts";
import { directoryAccess } from "../../src/directory/access.ts";
import { TEST_DB } from "../support/db.ts";
import { BASE, testGateway } from "../support/storage.ts";
import { keysClient } from "../../src/sdk/keys.ts";
import { s3ApiOver } from "../s3api/harness.ts";
import { granter } from "../quota/grants.ts";
import { chunkKey } from "../../src/storage/dfs/cid.ts";
import { until } from "../support/until.ts";

/** Tables an upload writes; a write elsewhere (a timer's bookkeeping) is not the upload's. */
const UPLOAD_TABLES = new Set(["session_requests", "storage_sessions", "vouchers_used", "voucher_counters", "quota_accounts", "quota_reservations", "traffic_usage", "blob_pins", "dfs_objects", "dfs_chunks", "dfs_object_chunks", "ipfs_pins", "ipfs_blocks", "ipfs_object_blocks", "buckets", "files"]);
const WRITE = /^\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)/i;
const LOCK = /FOR\s+UPDATE\s*$/i;

/** "write TABLE", "lock" (a row lock: `SELECT … FOR UPDATE`) or "read". */
function kind(text: string): string {
  const table = WRITE.exec(text)?.[1];
  return table ? `write ${table.toLowerCase()}` : LOCK.test(text) ? "lock" : "read";
}
interface Commit {
  /** Tables its statements wrote. */
  tables: Set<string>;
  /** Its statements in order, as `kind` names them. */
  statements: string[];
  /** "→ KIND" when a statement is sent, "← KIND" when its answer is seen: a statement sent before
   * another's answer went out without waiting for it (one round trip on PostgreSQL). */
  events: string[];
  /** Whether its COMMIT fsyncs: SQLite's level at commit time; every PostgreSQL commit is. */
  fsync: boolean;
}

/**
 * Records every commit made on the gateway's database, in order: the real `Sql` runs everything,
 * the recorder only watches (its transactions' statements, and writes outside any transaction,
 * which commit on their own and each await an fsync).
 */
function recordCommits(sql: Sql) {
  const commits: Commit[] = [];
  /** Statements outside any transaction that wrote nothing. */
  const reads: string[] = [];
  /** Transactions begun and not yet resolved (a COMMIT whose fsync is still under way). */
  const running = new Set<Promise<void>>();
  // Transactions commit one at a time on SQLite: the COMMIT right after a watched function
  // returned is that transaction's.
  let committing: { fsync: boolean } | undefined;
  if (sql instanceof SqliteSql) {
    const wal = sql.wal;
    sql.onCommit = (durable) => {
      if (committing) committing.fsync = durable && wal !== undefined;
      committing = undefined;
    };
  }
  const written = (text: string, into: Set<string>) => {
    const table = WRITE.exec(text)?.[1];
    if (table) into.add(table.toLowerCase());
  };
  const tx = sql.tx.bind(sql);
  const run = sql.run.bind(sql);
  const get = sql.get.bind(sql);
  const all = sql.all.bind(sql);
  const single = (text: string) => {
    const tables = new Set<string>();
    written(text, tables);
    if (tables.size) commits.push({ tables, statements: [kind(text)], events: [], fsync: true });
    else reads.push(text);
  };
  Object.assign(sql, {
    tx: <T>(fn: (q: Queryable) => Promise<T>, opts?: TxOptions) => {
      let tables = new Set<string>();
      let statements: string[] = [];
      let events: string[] = [];
      const seen = { fsync: true };
      const watch = <R>(text: string, answer: Promise<R>): Promise<R> => {
        written(text, tables);
        statements.push(kind(text));
        events.push(`→ ${kind(text)}`);
        const heard = events;
        return answer.then((r) => (heard.push(`← ${kind(text)}`), r));
      };
      const done = tx(async (inner: Queryable) => {
        // a retried attempt starts over
        tables = new Set();
        statements = [];
        events = [];
        const watched: Queryable = {
          dialect: inner.dialect,
          all: (text, params) => watch(text, inner.all(text, params)),
          get: (text, params) => watch(text, inner.get(text, params)),
          run: (text, params) => watch(text, inner.run(text, params)),
        };
        const out = await fn(watched);
        if (inner.dialect === "sqlite") committing = seen;
        return out;
      }, opts).then((out) => {
        if (tables.size) commits.push({ tables, statements, events, fsync: seen.fsync });
        return out;
      });
      const settled = done.then(
        () => void running.delete(settled),
        () => void running.delete(settled),
      );
      running.add(settled);
      return done;
    },
    run: (text: string, params?: readonly Param[]) => run(text, params).then((n) => (single(text), n)),
    get: (text: string, params?: readonly Param[]) => get(text, params).then((r) => (single(text), r)),
    all: (text: string, params?: readonly Param[]) => all(text, params).then((r) => (single(text), r)),
  });
  return {
    /** The commits `work` made that wrote an upload's tables. */
    async during(work: () => Promise<unknown>): Promise<Commit[]> {
      const from = commits.length;
      await work();
      return commits.slice(from).filter((c) => [...c.tables].some((t) => UPLOAD_TABLES.has(t)));
    },
    /** The commits `work` made that wrote an upload's tables or a deletion's tombstones, and
     * the statements outside any transaction that wrote nothing (each a commit on PostgreSQL). */
    async withDeletionsDuring(work: () => Promise<unknown>): Promise<{ commits: Commit[]; reads: string[] }> {
      const from = commits.length;
      const readFrom = reads.length;
      await work();
      return { commits: commits.slice(from).filter((c) => [...c.tables].some((t) => UPLOAD_TABLES.has(t) || t === "blob_tombstones")), reads: reads.slice(readFrom) };
    },
    /** Once every transaction begun so far has resolved, and so is recorded if it committed. */
    async idle(): Promise<void> {
      await Promise.all([...running]);
    },
    /** Reads the recorder does not see: a test's own look at the state. */
    unwatched: { all } as Pick<Queryable, "all">,
    /** The statements outside any transaction, writing nothing, that `work` ran. */
    async readsDuring(work: () => Promise<unknown>): Promise<string[]> {
      const from = reads.length;
      await work();
      return reads.slice(from);
    },
  };
}

/** How many times a statement of the commit went out only after an answer: its round trips less one. */
function waitsIn(commit: Commit | undefined): number {
  const events = commit?.events ?? [];
  return events.filter((e, i) => e.startsWith("→") && events[i - 1]?.startsWith("←")).length;
}

const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));

/**
 * What every acknowledged small upload's commits must show: two, in this order — the blob pins,
 * then the file row's, which carries both claims and the content's rows, drops the pins and counts
 * the voucher's bytes (seven commits before folding).
 */
function expectUploadCommits(commits: Commit[], content: "dfs_objects" | "ipfs_pins") {
  const tables = commits.map((c) => [...c.tables]);
  expect(tables).toHaveLength(2);
  expect(tables[0]).toEqual(["blob_pins"]);
  expect(tables[1]).toEqual(expect.arrayContaining(["files", "session_requests", "vouchers_used", content, "blob_pins", "voucher_counters"]));
  for (const table of ["voucher_counters", "vouchers_used", "session_requests"]) expect(commits.filter((c) => c.tables.has(table))).toHaveLength(1);
  // SQLite: no other commit of the upload fsyncs (PostgreSQL keeps each commit durable).
  expect(commits.map((c) => c.fsync)).toEqual(TEST_DB === "sqlite" ? [false, true] : [true, true]);
}

// With the directory's `Public` for the upload's answer, as the server has it.
const gw = await testGateway({ quota: true, extra: { publicCids: (owner, cids, q) => directoryAccess(gw.database.sql).publicCids(owner, cids, q) } });
const recorder = recordCommits(gw.database.sql);
const grant = granter(gw.chain);
const plain = await testGateway({ ipfs: false });
const plainRecorder = recordCommits(plain.database.sql);

describe("an acknowledged upload, with quota", () => {
  for (const kind of ["dfs", "ipfs"] as const) {
    test(`${kind}: one fsync'd commit, the file row's with both claims, the content's rows and the voucher's count, after the pins`, async () => {
      const { client, account } = await gw.user();
      await grant(account.address, "space", 10_000_000);
      await grant(account.address, "traffic", 10_000_000);
      let entry: Awaited<ReturnType<typeof client.upload>> | undefined;
      const commits = await recorder.during(async () => {
        entry = await client.upload(kind, random(4096), { name: `small-${kind}.bin` });
      });
      expect(entry?.Size).toBe(4096);
      expectUploadCommits(commits, kind === "dfs" ? "dfs_objects" : "ipfs_pins");
      // The quota's exact check settled in the file row's transaction too.
      expect(commits.find((c) => c.tables.has("files"))?.tables.has("traffic_usage")).toBe(true);
      expect((await client.space()).SizeByte).toBe(10_000_000 - 4096);
    });
  }

  // The entry a file replaces lets go of its content in the commit that drops its row: no crash
  // leaves that content counted for a row that is gone, and no commit of its own.
  for (const kind of ["dfs", "ipfs"] as const) {
    test(`${kind}: a replacement drops the old content's reference in the file row's commit, the commit after the pins`, async () => {
      const { client, account } = await gw.user();
      await grant(account.address, "space", 10_000_000);
      await grant(account.address, "traffic", 10_000_000);
      const shared = random(4096);
      const kept = await client.upload(kind, shared, { name: "kept.bin" });
      await client.upload(kind, shared, { name: "swapped.bin" });
      const content = kind === "dfs" ? "dfs_objects" : "ipfs_pins";
      const refs = async (cid: string) => (kind === "dfs" ? (await gw.database.sql.get<{ refs: number }>("SELECT refs FROM dfs_objects WHERE cid = $1", [cid]))?.refs : undefined);
      // Content still referenced elsewhere: its count drops, nothing more.
      let alone: Awaited<ReturnType<typeof client.upload>> | undefined;
      let commits = await recorder.during(async () => {
        alone = await client.upload(kind, random(4096), { name: "swapped.bin" });
      });
      expectUploadCommits(commits, content);
      const row = commits[1]?.statements ?? [];
      expect(row.slice(row.indexOf("lock") + 1)).toContain(`write ${content}`);
      if (kind === "dfs") expect(await refs(kept.Cid)).toBe(1);
      // Content referenced by that entry alone: its rows go in the same commit; deleting its blobs
      // afterwards writes none of an upload's tables.
      commits = await recorder.during(() => client.upload(kind, random(4096), { name: "swapped.bin" }));
      expectUploadCommits(commits, content);
      // Round trips after the first: one for the replaced Cid's release (it needs the Cid the row's
      // statements answer); dfs one more, for the chunks its manifest names (read under the object's lock).
      expect(waitsIn(commits[1])).toBe(kind === "dfs" ? 2 : 1);
      if (kind === "dfs") expect(await refs(alone?.Cid ?? "")).toBeUndefined();
      expect((await client.space()).SizeByte).toBe(10_000_000 - 2 * 4096); // two files: the replaced ones count no more
    });
  }

  // D16's lock on the account's quota row is held until the COMMIT, and one account's uploads
  // wait for each other there: on PostgreSQL each statement under it is a round trip in that wait
  // (2 ms a lock at 13 statements, about 400 uploads/s for one account). Under it go
  // only the file row and what the quota decides with it: the content's rows, the bucket and the
  // account's row come before it, the quota's numbers are one read; both claims and the answer's
  // `Public` ride along: one round trip on PostgreSQL, the lock's own included.
  test("dfs: under the account's lock, in one round trip with it, only the file row, both claims, one read of the quota, the two counts and the answer's Public", async () => {
    const { client, account } = await gw.user();
    await grant(account.address, "space", 10_000_000);
    await grant(account.address, "traffic", 10_000_000);
    // The account's first upload makes its quota row and its bucket, before the lock; later ones
    // read in their first look that both exist, and send no insert of them.
    const first = await recorder.during(() => client.upload("dfs", random(4096), { name: "first.bin" }));
    const made = first.find((c) => c.tables.has("files"))?.statements ?? [];
    expect(made.slice(0, made.indexOf("lock"))).toEqual(expect.arrayContaining(["write quota_accounts", "write buckets"]));
    const commits = await recorder.during(() => client.upload("dfs", random(4096), { name: "locked.bin" }));
    const statements = commits.find((c) => c.tables.has("files"))?.statements ?? [];
    const lock = statements.indexOf("lock");
    expect(lock).toBeGreaterThan(0);
    expect(statements.slice(0, lock)).toEqual(expect.arrayContaining(["write dfs_objects", "write dfs_chunks", "write dfs_object_chunks", "write blob_pins"]));
    expect(statements.filter((t) => t === "write quota_accounts" || t === "write buckets")).toEqual([]);
    expect(statements.slice(lock + 1)).toEqual(["write files", "write files", "write storage_sessions", "write session_requests", "write vouchers_used", "read", "write traffic_usage", "write voucher_counters", "read"]);
    // All of them sent with the lock, before its answer: one round trip under it.
    const events = commits.find((c) => c.tables.has("files"))?.events ?? [];
    expect(events.indexOf("← lock")).toBeGreaterThan(events.lastIndexOf("→ read"));
  });

  // Each answer a statement waits for before the next goes out is a round trip on PostgreSQL (and
  // what the backend spends most on, more than the statements themselves). The file row's
  // transaction sends everything at once: the content's rows (those a new Cid alone needs
  // conditioned in SQL on its row being new, not sent after its answer), the account's row, the
  // lock and what goes under it.
  for (const kind of ["dfs", "ipfs"] as const) {
    test(`${kind}: the file row's transaction is one round trip, new content or not`, async () => {
      const { client, account } = await gw.user();
      await grant(account.address, "space", 10_000_000);
      await grant(account.address, "traffic", 10_000_000);
      const bytes = random(4096);
      for (const name of ["new.bin", "same-content.bin"]) {
        const commits = await recorder.during(() => client.upload(kind, bytes, { name }));
        expect({ name, waits: waitsIn(commits.find((c) => c.tables.has("files"))) }).toEqual({ name, waits: 0 });
      }
    });
  }

  // Each statement outside a transaction is a round trip of its own on PostgreSQL.
  for (const kind of ["dfs", "ipfs"] as const) {
    test(`${kind}: outside a transaction one statement, reading the session, the voucher, the quota's first look and whether the account's rows exist together; whether a tombstone or a row names the content's blobs is read in their pin's transaction, the tombstones by the pin's own statement`, async () => {
      const { client, account } = await gw.user();
      await grant(account.address, "space", 10_000_000);
      await grant(account.address, "traffic", 10_000_000);
      await client.upload(kind, random(4096), { name: "first.bin" }); // the SDK has read its voucher counter
      let commits: Commit[] = [];
      const reads = await recorder.readsDuring(async () => {
        commits = await recorder.during(() => client.upload(kind, random(4096), { name: "reads.bin" }));
      });
      expect(reads).toHaveLength(1);
      const read = reads[0] ?? "";
      expect(["FROM storage_sessions", "FROM session_requests", "FROM vouchers_used", "FROM quota_reservations", "FROM quota_accounts", "FROM buckets"].filter((t) => read.includes(t))).toHaveLength(6);
      expect(commits[0]?.statements).toEqual(["write blob_pins", "read"]);
    });
  }
});

// A replacement frees the old content's blobs; deciding their deletion (no row references them, no
// upload pins them) and dropping the tombstones afterwards were two more commits each. Under a
// stream of uploads both ride in the pin transactions the uploads make anyway.
describe("replacing uploads in a stream", () => {
  test("dfs: the old content's deletions cost no commit of their own, and its blobs go", async () => {
    // Clients uploading at once, each one file after another under a name of its own.
    const clients: Awaited<ReturnType<typeof gw.user>>["client"][] = [];
    for (let i = 0; i < 3; i++) {
      const { client, account } = await gw.user();
      await grant(account.address, "space", 10_000_000);
      await grant(account.address, "traffic", 100_000_000);
      await client.upload("dfs", random(4096), { name: "mine.bin" });
      clients.push(client);
    }
    const store = gw.blobs.store;
    const chunks = async () => {
      const keys: string[] = [];
      for await (const key of store.list("dfs/")) keys.push(key);
      return keys.sort();
    };
    /** The chunks no row names any more: the ones a deletion still owes. */
    const unreferenced = async () => {
      const named = new Set((await recorder.unwatched.all<{ hash: string }>("SELECT hash FROM dfs_chunks")).map((r) => chunkKey(r.hash)));
      return (await chunks()).filter((k) => !named.has(k));
    };
    const tombstones = () => recorder.unwatched.all("SELECT key FROM blob_tombstones");
    expect(await until("no chunk left over", unreferenced, (left) => left.length === 0, 10_000)).toEqual([]);
    const stored = (await chunks()).length;
    const ROUNDS = 6;
    const { commits, reads } = await recorder.withDeletionsDuring(async () => {
      await Promise.all(
        clients.map(async (client) => {
          for (let i = 0; i < ROUNDS; i++) await client.upload("dfs", random(4096), { name: "mine.bin" });
        }),
      );
      // Every replaced content's chunk goes, and no tombstone is left behind.
      await until("the replaced chunks deleted", unreferenced, (left) => left.length === 0, 10_000);
      await until("no tombstone left", tombstones, (rows) => rows.length === 0, 10_000);
    });
    const uploads = clients.length * ROUNDS;
    expect((await chunks()).length).toBe(stored); // each client's one file, of one chunk
    // Each upload: one read, the pins' transaction, the file row's; the decisions and the
    // tombstones' drops ride in the pins'. Only the last deletions may find no upload after them:
    // at worst each client's last, by itself (its decision, then its drop).
    const tail = 2 * clients.length;
    expect(commits.filter((c) => !c.tables.has("blob_pins") && c.tables.has("blob_tombstones")).length).toBeLessThanOrEqual(tail);
    expect(commits.length + reads.length).toBeLessThanOrEqual(3 * uploads + tail);
  });
});

describe("an upload's claims", () => {
  // In the file row's transaction, under the account's lock, in the row's round trip on
  // PostgreSQL: writes only. The session's raise takes its row lock and answers the
  // row; its ids below the window are pruned on one call in 16 (restricted.test.ts). The
  // voucher's claim reads nothing: its base is the count read before the body (vouchers.ts).
  test("both claims in the file row's transaction: the session's raise, the id's claim, the voucher's claim", async () => {
    const { client } = await plain.user();
    await client.upload("dfs", random(4096), { name: "first.bin" }); // the session's window has a highest id
    const commits = await plainRecorder.during(() => client.upload("dfs", random(4096), { name: "claimed.bin" }));
    const statements = commits.find((c) => c.tables.has("files"))?.statements ?? [];
    const from = statements.indexOf("write storage_sessions");
    expect(statements.slice(from, from + 3)).toEqual(["write storage_sessions", "write session_requests", "write vouchers_used"]);
  });
});

describe("an acknowledged upload, without quota", () => {
  test("dfs: the same one fsync'd commit carrying the claims; the voucher counts what moved", async () => {
    const { client, account } = await plain.user();
    const commits = await plainRecorder.during(() => client.upload("dfs", random(4096), { name: "small.bin" }));
    expectUploadCommits(commits, "dfs_objects");
    expect(await plain.storage?.vouchers.usedBy(account.address)).toBe(4096);
  });
});

// A download's voucher is accepted once (D6): its claim must be on disk before any byte goes out,
// or a power cut could hand the same voucher's bytes out again. Whole bodies (up to a chunk) and
// streamed ones alike, with quota (the claim commits with the traffic's hold or charge) and without.
describe("a download's claim", () => {
  const MiB = 1024 * 1024;
  for (const [what, bytes] of [["a body read whole", 4096], ["a streamed body", 3 * MiB + 5]] as const) {
    test(`${what}: the voucher's claim commits with an fsync, with quota and without`, async () => {
      for (const [g, rec, quota] of [[gw, recorder, true], [plain, plainRecorder, false]] as const) {
        const { client, account } = await g.user();
        if (quota) {
          await grant(account.address, "space", 10_000_000);
          await grant(account.address, "traffic", 100_000_000);
        }
        const entry = await client.upload("dfs", random(bytes), { name: "down.bin" });
        const commits = await rec.during(async () => {
          const res = await client.download("dfs", entry.Cid, { size: entry.Size });
          expect((await res.arrayBuffer()).byteLength).toBe(bytes);
        });
        const claim = commits.find((c) => c.tables.has("vouchers_used"));
        expect({ quota, claimed: claim !== undefined, fsync: claim?.fsync }).toEqual({ quota, claimed: true, fsync: true });
      }
    });
  }

  // Each statement outside a transaction is a round trip (and a commit) of its own on PostgreSQL.
  test("a body read whole: the voucher's peek and the traffic pool's check are one statement before its transaction", async () => {
    const { client, account } = await gw.user();
    await grant(account.address, "space", 10_000_000);
    await grant(account.address, "traffic", 100_000_000);
    const entry = await client.upload("dfs", random(4096), { name: "looked.bin" });
    const reads = await recorder.readsDuring(async () => {
      const res = await client.download("dfs", entry.Cid, { size: entry.Size });
      expect((await res.arrayBuffer()).byteLength).toBe(4096);
    });
    const looks = reads.filter((r) => r.includes("FROM vouchers_used") || r.includes("FROM quota_reservations"));
    expect(looks.map((r) => ["FROM vouchers_used", "FROM quota_reservations", "FROM traffic_usage"].filter((t) => r.includes(t)))).toEqual([["FROM vouchers_used", "FROM quota_reservations", "FROM traffic_usage"]]);
  });
});

// An access key's account pays its traffic with no voucher: a body read whole is charged as a
// download's is, in one commit with no hold (a hold and its settlement took two), and streams
// hold their length, then settle.
const s3 = await s3ApiOver(gw);
describe("an access key's read (S3 GetObject)", () => {
  const MiB = 1024 * 1024;
  const meter = gw.quota?.meter;
  for (const [what, bytes, expected] of [
    ["a body read whole", 4096, [["traffic_usage"]]],
    ["a streamed body", 3 * MiB + 5, [["quota_reservations"], ["quota_reservations", "traffic_usage"]]],
  ] as const) {
    test(`${what}: its traffic counted in ${expected.length === 1 ? "one commit, no hold" : "a hold, then its settlement"}`, async () => {
      const { client, account } = await gw.user();
      await grant(account.address, "space", 10_000_000);
      await grant(account.address, "traffic", 100_000_000);
      const key = await keysClient({ baseUrl: BASE, store: client, fetch: gw.fetch }).create({ access: "rw", bucket: "*" });
      const body = random(bytes);
      expect((await s3.signed(key, "PUT", "/dfs/read.bin", { body })).status).toBe(200);
      const did = `did:ethr:0x${gw.config.chainId.toString(16)}:${account.address}`;
      const left = async () => (await meter?.record(account.address, did, "traffic"))?.SizeByte;
      const before = await left();
      const commits = await recorder.during(async () => {
        const res = await s3.signed(key, "GET", "/dfs/read.bin");
        expect(res.status).toBe(200);
        expect(new Uint8Array(await res.arrayBuffer())).toEqual(body);
        // The client has every byte as soon as the last one leaves: a streamed body's settlement
        // (which drops its hold) may commit just after, and its transaction resolves once its
        // COMMIT is on disk.
        const holds = async () => (await recorder.unwatched.all("SELECT id FROM quota_reservations WHERE account = $1 AND kind = 'traffic'", [account.address])).length;
        await until("the traffic's hold settled", holds, (n) => n === 0, 10_000);
        await recorder.idle();
      });
      expect(commits.map((c) => [...c.tables].filter((t) => t !== "quota_accounts").sort())).toEqual(expected.map((t) => [...t]));
      expect((before ?? 0) - ((await left()) ?? 0)).toBe(bytes);
    });
  }
});
