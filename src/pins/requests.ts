/**
 * The `pin_requests` table's one owner (schema.ts): the API's reads and writes of pin requests and
 * the worker's claims under a lease. One SQL text for SQLite and PostgreSQL, except for the two
 * functions each spells its own way (substring position, a JSON field), chosen by dialect.
 *
 * A claim is one conditional UPDATE: a row that is queued, or pinning under a lapsed lease, is
 * taken by whoever's statement reaches it first (PostgreSQL re-reads the condition on the locked
 * row; SQLite runs one writer at a time), so two gateways never work one pin at once. Every write
 * of a working gateway names its lease (`lease_holder`), so a gateway that lost its row (it was
 * removed, or a pause let the lease lapse and another take it) changes nothing.
 */
import type { Param, Queryable } from "../db/sql.ts";

export type PinStatusName = "queued" | "pinning" | "pinned" | "failed";

export interface PinRow {
  id: string;
  did: string;
  cid: string;
  root: string;
  name: string | null;
  origins: string;
  meta: string;
  status: PinStatusName;
  details: string | null;
  createdAt: number;
  updatedAt: number;
}

export interface PinFilter {
  /** Canonical Cids (any of them). */
  roots?: readonly string[];
  name?: { text: string; match: "exact" | "iexact" | "partial" | "ipartial" };
  statuses: readonly PinStatusName[];
  /** Epoch ms, exclusive. */
  before?: number;
  after?: number;
  /** Every key with its value. */
  meta?: Readonly<Record<string, string>>;
  limit: number;
}

const COLUMNS = `id, did, cid, root, name, origins, meta, status, details, created_at AS "createdAt", updated_at AS "updatedAt"`;
const INSERT = `INSERT INTO pin_requests (id, did, cid, root, name, origins, meta, status, details, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', NULL, $8, $8)`;
const GET = `SELECT ${COLUMNS} FROM pin_requests WHERE id = $1 AND did = $2`;
const REMOVE = `DELETE FROM pin_requests WHERE id = $1 AND did = $2 RETURNING ${COLUMNS}`;
const OPEN = "SELECT COUNT(*) AS n FROM pin_requests WHERE did = $1 AND status IN ('queued', 'pinning')";
const ALL = "SELECT COUNT(*) AS n FROM pin_requests WHERE did = $1";
const BY_STATUS = "SELECT status, COUNT(*) AS n FROM pin_requests GROUP BY status";
// The oldest claimable row, taken only if it still is when the UPDATE reaches it.
const CLAIM = `UPDATE pin_requests SET status = 'pinning', lease_holder = $1, lease_until = $3, updated_at = $2
  WHERE id = (SELECT id FROM pin_requests WHERE (status = 'queued' OR (status = 'pinning' AND lease_until < $2)) ORDER BY created_at LIMIT 1)
    AND (status = 'queued' OR (status = 'pinning' AND lease_until < $2))
  RETURNING ${COLUMNS}`;
const RENEW = "UPDATE pin_requests SET lease_until = $3 WHERE id = $1 AND lease_holder = $2 AND status = 'pinning' RETURNING id";
const FINISH = "UPDATE pin_requests SET status = $3, details = $4, updated_at = $5, lease_holder = NULL, lease_until = NULL WHERE id = $1 AND lease_holder = $2 AND status = 'pinning' RETURNING id";
const LET_GO = "UPDATE pin_requests SET lease_until = 0 WHERE id = $1 AND lease_holder = $2 AND status = 'pinning'";
const LET_GO_OWN = "UPDATE pin_requests SET lease_until = 0 WHERE lease_holder = $1 AND status = 'pinning'";

export function insertPin(q: Queryable, row: Omit<PinRow, "status" | "details" | "updatedAt">): Promise<void> {
  return q.run(INSERT, [row.id, row.did, row.cid, row.root, row.name, row.origins, row.meta, row.createdAt]).then(() => undefined);
}

export const getPin = (q: Queryable, did: string, id: string) => q.get<PinRow>(GET, [id, did]);
export const removePin = (q: Queryable, did: string, id: string) => q.get<PinRow>(REMOVE, [id, did]);
export const openPins = async (q: Queryable, did: string) => Number((await q.get<{ n: number }>(OPEN, [did]))?.n ?? 0);
export const allPins = async (q: Queryable, did: string) => Number((await q.get<{ n: number }>(ALL, [did]))?.n ?? 0);
/** Every account's pin requests, by status (the metrics; no account is named). */
export async function pinsByStatus(q: Queryable): Promise<Record<PinStatusName, number>> {
  const out: Record<PinStatusName, number> = { queued: 0, pinning: 0, pinned: 0, failed: 0 };
  for (const r of await q.all<{ status: PinStatusName; n: number | string }>(BY_STATUS)) out[r.status] = Number(r.n);
  return out;
}
export const latestPin = async (q: Queryable, did: string) => Number((await q.get<{ t: number | null }>("SELECT MAX(created_at) AS t FROM pin_requests WHERE did = $1", [did]))?.t ?? 0);

/** The rows of `did` the filter matches, newest first, at most `limit`, and how many match in all. */
export async function listPins(q: Queryable, did: string, f: PinFilter): Promise<{ count: number; rows: PinRow[] }> {
  const params: Param[] = [did];
  const p = (v: Param) => {
    params.push(v);
    return `$${params.length}`;
  };
  const where = ["did = $1", `status IN (${f.statuses.map((s) => p(s)).join(", ")})`];
  if (f.roots?.length) where.push(`root IN (${f.roots.map((r) => p(r)).join(", ")})`);
  if (f.before !== undefined) where.push(`created_at < ${p(f.before)}`);
  if (f.after !== undefined) where.push(`created_at > ${p(f.after)}`);
  if (f.name) {
    const folded = f.name.match === "iexact" || f.name.match === "ipartial";
    const col = folded ? "LOWER(name)" : "name";
    const arg = folded ? `LOWER(${p(f.name.text)})` : p(f.name.text);
    if (f.name.match === "exact" || f.name.match === "iexact") where.push(`${col} = ${arg}`);
    else where.push(q.dialect === "postgres" ? `STRPOS(${col}, ${arg}) > 0` : `INSTR(${col}, ${arg}) > 0`);
  }
  for (const [k, v] of Object.entries(f.meta ?? {})) {
    const field = q.dialect === "postgres" ? `(CAST(meta AS jsonb) ->> CAST(${p(k)} AS TEXT))` : `json_extract(meta, '$.' || json_quote(${p(k)}))`;
    where.push(`${field} = ${p(v)}`);
  }
  const cond = where.join(" AND ");
  const [counted, rows] = await Promise.all([
    q.get<{ n: number }>(`SELECT COUNT(*) AS n FROM pin_requests WHERE ${cond}`, params),
    q.all<PinRow>(`SELECT ${COLUMNS} FROM pin_requests WHERE ${cond} ORDER BY created_at DESC, id DESC LIMIT ${Math.trunc(f.limit)}`, params),
  ]);
  return { count: Number(counted?.n ?? 0), rows };
}

const WAITING = "SELECT id FROM pin_requests WHERE status = 'queued' OR (status = 'pinning' AND lease_until < $1) LIMIT 1";

/**
 * Takes the oldest pin waiting for work (or whose worker's lease lapsed) for `holder` until
 * `now + leaseMs`. An idle worker asks every second: a read first, so an idle cluster writes nothing.
 */
export async function claimPin(q: Queryable, holder: string, now: number, leaseMs: number): Promise<PinRow | undefined> {
  if (!(await q.get(WAITING, [now]))) return undefined;
  return q.get<PinRow>(CLAIM, [holder, now, now + leaseMs]);
}

/** Extends `holder`'s lease of the pin; false when it is no longer theirs (removed, or taken over). */
export const renewPin = async (q: Queryable, id: string, holder: string, until: number) => (await q.get(RENEW, [id, holder, until])) !== undefined;

/** The pin's outcome, if `holder` still works it. */
export const finishPin = async (q: Queryable, id: string, holder: string, status: "pinned" | "failed", details: string | null, now: number) =>
  (await q.get(FINISH, [id, holder, status, details, now])) !== undefined;

/** Lets another gateway take the pin at once (this one is stopping mid-work). */
export const letGo = (q: Queryable, id: string, holder: string) => q.run(LET_GO, [id, holder]).then(() => undefined);

/**
 * Lets go of every pin `holder` was working: at a worker's start, those are its previous
 * process's (the holder is the data dir's gateway id, which one process holds at a time), which
 * died with it; they are taken up now rather than once their leases lapse.
 */
export const letGoOwn = (q: Queryable, holder: string) => q.run(LET_GO_OWN, [holder]);
