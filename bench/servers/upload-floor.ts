/**
 * The floor under a small upload (issue 10's "small uploads ≥ 0.5×" row): the baseline's upload
 * (servers/receive.ts: the same multipart parsing, SHA-256 and one fsync'd file) plus only what
 * DESIGN demands of every upload whatever the server, done with Stowage's own fastest pieces:
 *
 * - D5: the request's EIP-712 signature recovered (identity/request-signer.ts, libsecp256k1) and
 *   its signer checked against the DID; the signed payload compared with the file's D9 Cid (one
 *   chunk: its SHA-256 as a raw leaf, which the baseline computes anyway);
 * - D6: the voucher's signature recovered (identity/voucher-signer.ts) and its payer checked;
 * - D5, D6, D16: ONE durable transaction that claims the requestID and the voucher once each
 *   (unique keys) and records the file, through Stowage's own layer: on SQLite (db/sqlite-sql.ts:
 *   WAL, the log fsync'd in the thread pool and shared by the commits written before it), or,
 *   given a database URL, on PostgreSQL (db/pg-sql.ts, READ COMMITTED: unique keys need no more)
 *   as a cluster's gateway keeps its rows. Its three statements go in one round trip
 *   (`together`), so a PostgreSQL upload costs three: BEGIN, the statements, COMMIT.
 *
 * Left out, so this is a floor and not a second Stowage: the session and Bearer token lookups, the
 * quota (D14), blob pins (D15), the chunk's folder fsync (the baseline fsyncs no folder either),
 * the request log, and node:http (Stowage's listener for D14's download lengths; this is
 * Bun.serve, as the baseline). Whatever a server keeping these guarantees does on top, it cannot
 * beat this one.
 *
 * POST /upload (the body Stowage's POST /dfs/ takes) → `{ id, size, cid }`; 400 with the reason
 * on a bad signature, payload or a claim made before (the bench stops on any). Prints "listening on URL"; exits on SIGTERM/SIGINT and
 * on EOF of stdin (servers/lifetime.ts).
 *
 * Run: bun bench/servers/upload-floor.ts '{"chainId":31337,"verifyingContract":"0x…","seller":"0x…"[,"databaseUrl":"postgres://…","pool":10]}'
 */
import { SQL as BunSQL } from "bun";
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Address } from "viem";
import { rawLeafCid } from "../../src/cid/tree.ts";
import { PgSql } from "../../src/db/pg-sql.ts";
import { type Sql, together } from "../../src/db/sql.ts";
import { SqliteSql } from "../../src/db/sqlite-sql.ts";
import { parseDid } from "../../src/identity/did.ts";
import { storageDomain } from "../../src/identity/eip712.ts";
import { requestSigner } from "../../src/identity/request-signer.ts";
import { voucherSigner } from "../../src/identity/voucher-signer.ts";
import { runUntilStopped } from "./lifetime.ts";
import { receiveFile } from "./receive.ts";

interface Spec {
  chainId: number;
  verifyingContract: Address;
  seller: Address;
  /** PostgreSQL instead of SQLite: a database of the floor's own, and its pool (as a gateway's). */
  databaseUrl?: string;
  pool?: number;
}

const spec = JSON.parse(process.argv[2] ?? "") as Spec;
const domain = storageDomain(spec.chainId, spec.verifyingContract);
const signerOfRequest = requestSigner(domain);
const signerOfVoucher = voucherSigner(domain, spec.seller);

const dir = mkdtempSync(join(tmpdir(), "stowage-bench-floor-"));
const TABLES = (fileId: string) => [
  "CREATE TABLE request_claims (did TEXT NOT NULL, token TEXT NOT NULL, request_id BIGINT NOT NULL, PRIMARY KEY (did, token, request_id))",
  "CREATE TABLE voucher_claims (payer TEXT NOT NULL, size BIGINT NOT NULL, PRIMARY KEY (payer, size))",
  `CREATE TABLE files (id ${fileId}, did TEXT NOT NULL, name TEXT NOT NULL, cid TEXT NOT NULL, size BIGINT NOT NULL)`,
];

/** The floor's three tables on SQLite (as Stowage opens its own) or on PostgreSQL. */
async function openFloorStore(): Promise<{ sql: Sql; close(): Promise<void> }> {
  if (spec.databaseUrl) {
    const client = new BunSQL(spec.databaseUrl, { max: spec.pool ?? 10, bigint: true });
    for (const table of TABLES("BIGSERIAL PRIMARY KEY")) await client.unsafe(table);
    return { sql: new PgSql(client), close: () => client.close() };
  }
  const file = join(dir, "floor.db");
  const db = new Database(file, { create: true, strict: true });
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("PRAGMA synchronous = FULL"); // SqliteSql then commits with NORMAL and fsyncs the log itself
  for (const table of TABLES("INTEGER PRIMARY KEY AUTOINCREMENT")) db.exec(table);
  const sql = new SqliteSql(db, file);
  return {
    sql,
    close: async () => {
      await sql.close();
      db.close();
    },
  };
}
const { sql, close } = await openFloorStore();

const CLAIM_REQUEST = "INSERT INTO request_claims (did, token, request_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING request_id";
const CLAIM_VOUCHER = "INSERT INTO voucher_claims (payer, size) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING size";
const ADD_FILE = "INSERT INTO files (did, name, cid, size) VALUES ($1, $2, $3, $4) RETURNING id";

async function upload(request: Request, path: string) {
  const { size, sha256, fields } = await receiveFile(request, path);
  const did = parseDid(fields.did ?? "", spec.chainId);
  const requestID = BigInt(fields.requestID ?? "");
  const signer = signerOfRequest({ did: fields.did ?? "", token: (fields.token ?? "") as `0x${string}`, requestID, action: "upload", payload: fields.payload ?? "" }, (fields.signature ?? "") as `0x${string}`);
  if (signer !== did.address) throw new Error("the request is not signed by the DID");
  if (signerOfVoucher({ size: BigInt(fields.size ?? ""), cid: fields.payload ?? "", expires: 0n }, (fields.sign ?? "") as `0x${string}`) !== did.address) throw new Error("the voucher is not signed by the DID");
  const cid = rawLeafCid(sha256).toString(); // one chunk: the file is its raw leaf (D9)
  if (cid !== fields.payload) throw new Error("payload is not the file's Cid");
  return sql.tx(
    async (tx) => {
      const [request, voucher, row] = await together(
        tx.get(CLAIM_REQUEST, [did.canonical, fields.token ?? "", Number(requestID)]),
        tx.get(CLAIM_VOUCHER, [did.address, Number(fields.size)]),
        tx.get<{ id: number }>(ADD_FILE, [did.canonical, path, cid, size]),
      );
      // A throw rolls back the file's row with the claims.
      if (!request) throw new Error("requestID already used");
      if (!voucher) throw new Error("voucher already used");
      return { id: row?.id, size, cid };
    },
    { isolation: "read committed" },
  );
}

let next = 0;
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(request) {
    if (request.method !== "POST" || new URL(request.url).pathname !== "/upload") return new Response("not found", { status: 404 });
    const path = join(dir, String(++next));
    try {
      return Response.json(await upload(request, path));
    } catch (err) {
      await unlink(path).catch(() => {});
      return Response.json({ error: String(err) }, { status: 400 });
    }
  },
});
console.log(`listening on http://127.0.0.1:${server.port}`);

await runUntilStopped(async () => {
  await server.stop();
  await close();
  rmSync(dir, { recursive: true, force: true });
});
