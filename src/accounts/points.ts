/**
 * Point-earning actions (spec 4.2 rows 13, 14; DESIGN.md D12). The catalog is data: an action's
 * points, whether it happens once, which actions it needs first, and how far apart repeats must
 * be. A record and the points it earns are written in one transaction, and a unique index on
 * (user, action, slot) is what makes "once" hold however many requests race.
 *
 * @example
 *   await points.add(user, 5)     // first liveness-check subscription: +100
 *   await points.latest(user, 5)  // { action: 5, points: 100, time: 1767225600 }
 */
import type { Config } from "../config.ts";
import type { Queryable } from "../db/sql.ts";
import { fail } from "./error-codes.ts";
import type { Ctx, UserRow } from "./types.ts";

export interface ActionRule {
  id: number;
  name: string;
  points: number;
  once: boolean;
  /** Actions the user must have recorded first. */
  needs?: readonly number[];
  /** Least time between two records of a repeatable action. */
  minGapMs?: (config: Config) => number;
}

const DAY_MS = 24 * 60 * 60_000;

export const actionCatalog: readonly ActionRule[] = [
  { id: 5, name: "first liveness-check subscription", points: 100, once: true },
  { id: 6, name: "liveness-check renewal", points: 50, once: false, needs: [5], minGapMs: (c) => c.renewalDays * DAY_MS },
];

/** Spec 2.13. */
export interface ActionRecord {
  action: number;
  points: number;
  time: number;
}

export interface PointsService {
  /** The user's latest record of the action, or null. */
  latest(user: UserRow, actionId: number): Promise<ActionRecord | null>;
  add(user: UserRow, actionId: number, opts?: unknown): Promise<ActionRecord>;
}

const LATEST = "SELECT id, action, points, time FROM action_records WHERE user_id = $1 AND action = $2 ORDER BY time DESC, id DESC LIMIT 1";
const INSERT = "INSERT INTO action_records (user_id, action, points, time, slot) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (user_id, action, slot) DO NOTHING RETURNING id";
const CREDIT = "UPDATE users SET points = points + $2, updated_at = $3 WHERE id = $1";

interface Row extends ActionRecord {
  id: number;
}

export function createPointsService(ctx: Ctx, catalog: readonly ActionRule[] = actionCatalog): PointsService {
  const { sql, now, config } = ctx;
  const rules = new Map(catalog.map((r) => [r.id, r]));
  const rule = (id: number) => {
    const r = rules.get(id);
    if (!r) throw fail("ACTION_UNKNOWN", String(id));
    return r;
  };

  const latestRow = (q: Queryable, userId: number, action: number) => q.get<Row>(LATEST, [userId, action]);

  const view = (r: ActionRecord): ActionRecord => ({ action: r.action, points: r.points, time: r.time });

  return {
    async latest(user, actionId) {
      rule(actionId);
      const row = await latestRow(sql, user.id, actionId);
      return row ? view(row) : null;
    },

    async add(user, actionId) {
      const r = rule(actionId);
      const t = now();
      // SERIALIZABLE (the default), not READ COMMITTED: the unique slot alone would keep a racing
      // renewal out too, but answer it "already recorded" where run one after the other it reads
      // "too soon"; run again after a conflict, it reads what SQLite's serial order answers.
      const outcome = await sql.tx(async (tx) => {
        const missing: number[] = [];
        for (const need of r.needs ?? []) if (!(await latestRow(tx, user.id, need))) missing.push(need);
        if (missing.length) return { ok: false as const, fail: "ACTION_NEEDS" as const, detail: `record action ${missing.join(", ")} first` };
        const previous = r.once ? undefined : await latestRow(tx, user.id, r.id);
        const gap = r.minGapMs?.(config) ?? 0;
        if (previous && t - previous.time * 1000 < gap) {
          const nextAt = new Date(previous.time * 1000 + gap).toISOString();
          return { ok: false as const, fail: "ACTION_TOO_SOON" as const, detail: `action ${r.id} can be recorded again from ${nextAt}` };
        }
        // "once", or the record this one follows: two requests that saw the same state collide here.
        const slot = r.once ? "once" : `after:${previous?.id ?? 0}`;
        const record = { action: r.id, points: r.points, time: Math.floor(t / 1000) };
        const inserted = await tx.get<{ id: number }>(INSERT, [user.id, record.action, record.points, record.time, slot]);
        if (!inserted) return { ok: false as const, fail: "ACTION_DONE" as const, detail: `action ${r.id}, ${r.name}` };
        await tx.run(CREDIT, [user.id, r.points, t]);
        return { ok: true as const, record: view(record) };
      });
      if (!outcome.ok) throw fail(outcome.fail, outcome.detail);
      return outcome.record;
    },
  };
}
