/**
 * The one async data-access layer every service calls (DESIGN.md D16), the same on SQLite (the
 * embedded default) and PostgreSQL (many gateways). Services write one SQL text for both dialects
 * with `$1…$n` placeholders; the adapters (sqlite-sql.ts, pg-sql.ts) bind it, cache prepared
 * statements and map results to plain JS values, so a service never sees a dialect's quirks:
 *
 * - int8 and `count(*)` arrive as JS numbers on both (Bun SQL returns them as strings or BigInt);
 *   PostgreSQL's `sum()` of integers is `numeric`, so portable SQL writes
 *   `CAST(COALESCE(SUM(x), 0) AS BIGINT)`.
 * - Booleans bind as JS booleans; rows hold 0/1 on SQLite and true/false on PostgreSQL, so read
 *   them through `Boolean(…)` (or compare in SQL against a bound parameter, never a 0/1 literal).
 * - `SELECT … FOR UPDATE` locks rows on PostgreSQL; on SQLite the suffix is dropped, since
 *   `BEGIN IMMEDIATE` already serialises every writing transaction.
 * - Conflicts are `INSERT … ON CONFLICT …`, never a caught unique violation: a failed statement
 *   aborts a PostgreSQL transaction.
 *
 * Why not drizzle's query builder, as the rest of D16 suggests: its builders and their types are
 * per dialect (one query would be written twice), and bench/ measured the builder's per-call
 * work at 54–67% of a small request's CPU. drizzle keeps the schema and the migration histories.
 *
 * @example
 *   const row = await sql.get<{ refs: number }>("SELECT refs FROM dfs_objects WHERE cid = $1", [cid])
 *   await sql.tx(async (tx) => {
 *     await tx.get("SELECT 1 FROM quota WHERE did = $1 FOR UPDATE", [did])
 *     await tx.run("UPDATE quota SET used = used + $2 WHERE did = $1", [did, bytes])
 *   }, { isolation: "read committed" })
 */

export type Dialect = "sqlite" | "postgres";

/** What a statement binds. */
export type Param = string | number | bigint | boolean | null | Uint8Array;

/** Runs statements: the database itself, or one open transaction. */
export interface Queryable {
  readonly dialect: Dialect;
  /** Every row the statement returns. */
  all<T extends object>(text: string, params?: readonly Param[]): Promise<T[]>;
  /** The first row, or undefined. */
  get<T extends object>(text: string, params?: readonly Param[]): Promise<T | undefined>;
  /** Runs a statement; resolves to the number of rows it changed. */
  run(text: string, params?: readonly Param[]): Promise<number>;
}

export interface TxOptions {
  /**
   * D16's rules. "serializable" (the default): PostgreSQL retries the whole function on a
   * serialization failure or deadlock, so the function must do nothing but statements (it may
   * run more than once). "read committed": for transactions whose every read-modify-write is a
   * relative update or follows `SELECT … FOR UPDATE` (a quota transaction locks the account's row
   * first); retried on deadlock only. SQLite serialises every writing transaction either way.
   */
  isolation?: "serializable" | "read committed";
  /**
   * false: this commit need not reach the disk by itself. On SQLite the transaction then resolves
   * without awaiting an fsync of the log (wal-sync.ts); the next durable commit's fsync carries it,
   * in order, and a killed process loses nothing (the OS has the write) — only a power cut can, and
   * it stops the gateway too. Only for rows that a power cut makes moot: claims that live as long
   * as the work that made them (an upload's blob pins and quota holds, an fsync per
   * chunk held the event loop ≈ 9 ms each on a busy disk). PostgreSQL ignores it: there another
   * gateway may rely on the row while its database restarts.
   */
  durable?: boolean;
  /**
   * Runs once the transaction has committed, before the call resolves; never when it fails. On
   * SQLite that is at the COMMIT, while the call still waits for the log's fsync (wal-sync.ts):
   * work that must follow the commit but may start before it is on disk overlaps that fsync (a
   * ranged GET's read). On PostgreSQL the COMMIT has waited for the disk already.
   */
  committed?: () => void;
}

export interface Sql extends Queryable {
  /** One transaction; commits when `fn` resolves, rolls back when it throws. */
  tx<T>(fn: (tx: Queryable) => Promise<T>, opts?: TxOptions): Promise<T>;
  /**
   * A number that changes whenever anything is committed to the database, by this process or
   * another (read-cache.ts keeps answers while it stays). Absent or undefined where the adapter
   * cannot tell: PostgreSQL (other gateways), SQLite in memory (its one connection's own commits
   * do not change it).
   */
  dataVersion?(): number | undefined;
  /** Why durable writes fail until a restart, once they do (SQLite: its log's fsync failed). */
  readonly failure?: Error | undefined;
  close(): Promise<void>;
}

/**
 * A piece of SQL (an expression, say) with its parameters numbered from `$1`, that one module
 * hands another to embed in a statement of its own: one round trip where two statements took two.
 */
export interface Fragment {
  text: string;
  params: Param[];
}

/** `f`'s text with its `$n` moved past the `before` parameters of the statement it goes into. */
export function shifted(f: Fragment, before: number): string {
  return f.text.replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + before}`);
}

/**
 * A read of one row that several modules' reads share: each gives named scalar expressions over
 * its own parameters (`$1…`, as a Fragment numbers them) and makes its answer of the values they
 * took. `looks` reads them all in ONE statement, a `SELECT` of every look's expressions. On
 * PostgreSQL each statement outside a transaction is a commit and a round trip of its own: an
 * upload's first looks (its session's, its voucher's, its quota's) took three.
 */
export interface Look<T> {
  /** Column name → a scalar SQL expression (a literal, a placeholder, a `(SELECT …)` of one value). */
  columns: Readonly<Record<string, string>>;
  params: readonly Param[];
  /** The answer, from the values of `columns` (by their names); may throw (a refusal). */
  read(row: Readonly<Record<string, unknown>>): T;
}

/** A look's answer; an optional look's, or undefined (distributes over `Look<T> | undefined`). */
type AnswerOf<X> = X extends Look<infer T> ? T : undefined;
type Answers<L extends readonly unknown[]> = { [K in keyof L]: AnswerOf<L[K]> };

/** Several looks as one (an absent one answers undefined): their columns side by side, their
 * reads in the order given, so the first refusal in that order is the one thrown. */
export function joined<L extends readonly (Look<unknown> | undefined)[]>(...list: L): Look<Answers<L>> {
  const columns: Record<string, string> = {};
  const params: Param[] = [];
  list.forEach((look, i) => {
    if (!look) return;
    const shift = params.length;
    for (const [name, expr] of Object.entries(look.columns)) columns[`l${i}_${name}`] = shifted({ text: expr, params: [] }, shift);
    params.push(...look.params);
  });
  return {
    columns,
    params,
    read: (row) =>
      list.map((look, i) => {
        if (!look) return undefined;
        const own: Record<string, unknown> = {};
        for (const name of Object.keys(look.columns)) own[name] = row[`l${i}_${name}`];
        return look.read(own);
      }) as unknown as Answers<L>,
  };
}

/** Reads `list` (`joined`) in one statement with `q`; no statement when every look is absent. */
export async function looks<L extends readonly (Look<unknown> | undefined)[]>(q: Queryable, ...list: L): Promise<Answers<L>> {
  const all = joined(...list);
  const names = Object.keys(all.columns);
  const row = names.length ? await q.get<Record<string, unknown>>(`SELECT ${names.map((n) => `${all.columns[n]} AS "${n}"`).join(", ")}`, all.params) : {};
  if (!row) throw new Error("a SELECT without FROM gave no row");
  return all.read(row);
}

/**
 * Statements of one transaction sent side by side, each started by the caller in the order they
 * must run: PostgreSQL's client pipelines them on the transaction's connection (one round trip
 * for all, where awaiting each took one apiece), SQLite runs each as it is called.
 * Waits for every one, then throws the first failure in the order given, so a caller's checks
 * keep their order. Never resolves early: a statement still running once its transaction ends
 * would, on SQLite, commit by itself after the ROLLBACK. An optional step left out (`undefined`,
 * as `hook?.settle(tx)` gives) is nothing to wait for.
 *
 * @example
 *   const [old, row] = await together(tx.get(DROP, [id]), tx.get(INSERT, [id, value]), hook?.settle(tx))
 */
export async function together<T extends readonly unknown[]>(...work: { [K in keyof T]: T[K] | Promise<T[K]> }): Promise<T> {
  const settled = await Promise.allSettled(work);
  for (const s of settled) if (s.status === "rejected") throw s.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/** Placeholders `$from…$(from+n-1)`, for `IN (…)` lists built at run time. */
export function placeholders(n: number, from = 1): string {
  return Array.from({ length: n }, (_, i) => `$${from + i}`).join(", ");
}

/** Rows per multi-row statement: far below SQLite's 32766 and PostgreSQL's 65535 parameters. */
export const BATCH = 500;

export function* batches<T>(items: readonly T[], size = BATCH): Generator<T[]> {
  for (let i = 0; i < items.length; i += size) yield items.slice(i, i + size);
}

/**
 * Every row of a query over many items, sent a batch at a time: `text(n)` is the statement for a
 * batch of n (its `IN` list binds the batch after `leading`).
 */
export async function allInBatches<T extends object>(q: Queryable, text: (n: number) => string, items: readonly Param[], leading: readonly Param[] = []): Promise<T[]> {
  const rows: T[] = [];
  for (const batch of batches(items)) rows.push(...(await q.all<T>(text(batch.length), [...leading, ...batch])));
  return rows;
}
