/**
 * The data-access layer (sql.ts) on PostgreSQL, over Bun's built-in SQL client. The client runs
 * with `bigint: true` so int8 arrives as BigInt, never as a string, and every BigInt of a row
 * becomes a number here (exact up to 2^53, as on SQLite; beyond it is an error, not a rounding).
 * Transactions follow D16: SERIALIZABLE by default, retried on a serialization failure (40001) or
 * a deadlock (40P01); READ COMMITTED for those built on row locks and relative updates.
 */
import type { SQL as BunSQL } from "bun";
import type { Param, Queryable, Sql, TxOptions } from "./sql.ts";

/** SQLSTATEs after which the whole transaction may simply run again. */
const RETRYABLE = new Set(["40001", "40P01"]);
const MAX_ATTEMPTS = 12;

function toNumber(v: bigint): number {
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new RangeError(`integer ${v} is beyond 2^53`);
  return n;
}

function mapRows<T>(rows: readonly Record<string, unknown>[]): T[] {
  const out: T[] = new Array(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i] as Record<string, unknown>;
    for (const k in row) {
      const v = row[k];
      if (typeof v === "bigint") row[k] = toNumber(v);
    }
    out[i] = row as T;
  }
  return out;
}

/** What a Bun SQL client and a Bun SQL transaction have in common. */
interface Unsafe {
  unsafe(text: string, params?: unknown[]): Promise<Record<string, unknown>[] & { count: number }>;
}

class PgQueryable implements Queryable {
  readonly dialect = "postgres" as const;
  constructor(private readonly client: Unsafe) {}
  async all<T extends object>(text: string, params: readonly Param[] = []): Promise<T[]> {
    return mapRows<T>(await this.client.unsafe(text, params as Param[]));
  }
  async get<T extends object>(text: string, params: readonly Param[] = []): Promise<T | undefined> {
    return (await this.all<T>(text, params))[0];
  }
  async run(text: string, params: readonly Param[] = []): Promise<number> {
    return (await this.client.unsafe(text, params as Param[])).count;
  }
}

function sqlState(err: unknown): string | undefined {
  const errno = (err as { errno?: unknown } | null)?.errno;
  return typeof errno === "string" ? errno : undefined;
}

export class PgSql extends PgQueryable implements Sql {
  constructor(private readonly pg: BunSQL) {
    super(pg as unknown as Unsafe);
  }

  async tx<T>(fn: (tx: Queryable) => Promise<T>, opts: TxOptions = {}): Promise<T> {
    const level = opts.isolation ?? "serializable";
    for (let attempt = 1; ; attempt++) {
      try {
        const out = (await this.pg.begin(`isolation level ${level}`, (tx) => fn(new PgQueryable(tx as unknown as Unsafe)))) as T;
        opts.committed?.();
        return out;
      } catch (err) {
        const state = sqlState(err);
        if (!state || !RETRYABLE.has(state) || attempt >= MAX_ATTEMPTS) throw err;
        // Backoff with jitter, so the transactions that collided do not collide again in step.
        await Bun.sleep(Math.random() * Math.min(100, 2 ** attempt));
      }
    }
  }

  close(): Promise<void> {
    return this.pg.close();
  }
}
