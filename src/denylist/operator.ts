/**
 * The operator's own denylist in the database (the `blocked` table, schema.ts): what
 * `stowage admin block|unblock|blocked` writes and lists, and what every gateway of a cluster
 * reads. The operator names a CID (`bafy…`), a path below one (`bafy…/docs/a.pdf`, `…/docs/*`), or
 * any rule of the compact format (`/ipfs/…`, `//<double hash>`); it is stored as that format's
 * rule, so the same matcher reads the operator's list and the files'.
 *
 * A running gateway notices a change with one cheap query (`version`): rows are only added and
 * lifted, never deleted, so the largest id and the number of lifted rows move with every change.
 *
 * @example
 *   await block(sql, "bafy…", "court order 2025-17")
 *   await unblock(sql, "bafy…")           // the rows it lifted
 */
import type { Queryable, Sql } from "../db/sql.ts";
import { parseAnyCid, parseRule, type Rule } from "./format.ts";
import { hashSupported } from "./rules.ts";

/** A block as `stowage admin blocked` lists it. */
export interface BlockRow {
  id: number;
  rule: string;
  reason: string;
  blockedAt: number;
  liftedAt: number | null;
}

/** What the operator named, as a rule: its text and the key one meaning has. */
export interface OperatorRule {
  rule: Rule;
  text: string;
  key: string;
}

/** Refusal of what the operator typed: a message for the command line. */
export class BlockInputError extends Error {
  override name = "BlockInputError";
}

/** The key of a rule: one spelling per meaning (CID version, codec and base do not matter). */
export function ruleKey(rule: Rule): string {
  if (rule.kind === "ipfs") return `ipfs ${rule.multihash} ${encodeURIComponent(rule.path)} ${rule.prefix ? "*" : "="}`;
  if (rule.kind === "double") return `double ${rule.fn} ${rule.hash}`;
  throw new BlockInputError(`${rule.text}: only /ipfs/ and // rules can be blocked here`);
}

/**
 * What the operator typed as one rule: `CID`, `CID/path`, `CID/path*` (a CID in any base), or a
 * rule of the compact format (`/ipfs/CID…`, `//HASH`). No exception (`!`): lifting is `unblock`.
 */
export function operatorRule(input: string): OperatorRule {
  const text = input.trim();
  if (text === "" || /\s/.test(text)) throw new BlockInputError("name one CID, path or rule, without spaces");
  if (/^[!+-]/.test(text)) throw new BlockInputError("an exception (!) is not blocked: unblock what the operator blocked, or add it to a denylist file");
  let ruleText = text;
  if (!text.startsWith("/")) {
    const slash = text.indexOf("/");
    const cid = slash < 0 ? text : text.slice(0, slash);
    try {
      parseAnyCid(cid);
    } catch {
      throw new BlockInputError(`not a CID: ${cid}`);
    }
    ruleText = `/ipfs/${text}`;
  }
  let rules: Rule[];
  try {
    rules = parseRule(ruleText, 1);
  } catch (err) {
    throw new BlockInputError(`${text}: ${(err as Error).message}`);
  }
  // A double hash that also reads as hex is two rules; the operator means the one this gateway can compute.
  const rule = rules.find((r) => r.kind !== "double" || hashSupported(r.fn)) ?? rules[0];
  if (!rule) throw new BlockInputError(`${text}: not a rule`);
  if (rule.kind === "double" && !hashSupported(rule.fn)) throw new BlockInputError(`${text}: a double hash made with a function this gateway does not compute (sha2-256 and blake3 are)`);
  return { rule, text: ruleText, key: ruleKey(rule) };
}

const ACTIVE = "SELECT id, rule, reason, blocked_at AS \"blockedAt\", lifted_at AS \"liftedAt\" FROM blocked WHERE lifted_at IS NULL ORDER BY id";
const ALL = "SELECT id, rule, reason, blocked_at AS \"blockedAt\", lifted_at AS \"liftedAt\" FROM blocked ORDER BY id";
const ACTIVE_OF = "SELECT id FROM blocked WHERE key = $1 AND lifted_at IS NULL";
const INSERT = "INSERT INTO blocked (key, rule, reason, blocked_at) VALUES ($1, $2, $3, $4) RETURNING id";
const UPDATE_REASON = "UPDATE blocked SET reason = $2 WHERE id = $1";
const LIFT = "UPDATE blocked SET lifted_at = $2 WHERE key = $1 AND lifted_at IS NULL RETURNING id, rule, reason, blocked_at AS \"blockedAt\", lifted_at AS \"liftedAt\"";
const VERSION = "SELECT COALESCE(MAX(id), 0) AS last, COUNT(lifted_at) AS lifted FROM blocked";

/** Blocks what `input` names. Already blocked: its reason is replaced, nothing else changes. */
export async function block(sql: Sql, input: string, reason: string, now = Date.now()): Promise<{ row: BlockRow; created: boolean }> {
  const { text, key } = operatorRule(input);
  if (reason.trim() === "") throw new BlockInputError("a block needs a reason (--reason TEXT): the record says why");
  return sql.tx(async (tx) => {
    const active = await tx.get<{ id: number }>(ACTIVE_OF, [key]);
    if (active) {
      await tx.run(UPDATE_REASON, [active.id, reason]);
      return { row: (await rowOf(tx, active.id)) as BlockRow, created: false };
    }
    const inserted = await tx.get<{ id: number }>(INSERT, [key, text, reason, now]);
    return { row: (await rowOf(tx, Number(inserted?.id))) as BlockRow, created: true };
  });
}

/** Lifts the blocks of what `input` names (however its CID is spelled); the rows it lifted. */
export async function unblock(sql: Sql, input: string, now = Date.now()): Promise<BlockRow[]> {
  const { key } = operatorRule(input);
  return (await sql.all<BlockRow>(LIFT, [key, now])).map(normalRow);
}

/** The blocks in force (with `all`: lifted ones too), oldest first. */
export async function blocks(q: Queryable, all = false): Promise<BlockRow[]> {
  return (await q.all<BlockRow>(all ? ALL : ACTIVE)).map(normalRow);
}

/** Changes whenever a block is added or lifted. */
export async function version(q: Queryable): Promise<string> {
  const row = await q.get<{ last: number; lifted: number }>(VERSION);
  return `${Number(row?.last ?? 0)}:${Number(row?.lifted ?? 0)}`;
}

async function rowOf(q: Queryable, id: number): Promise<BlockRow | undefined> {
  const row = await q.get<BlockRow>("SELECT id, rule, reason, blocked_at AS \"blockedAt\", lifted_at AS \"liftedAt\" FROM blocked WHERE id = $1", [id]);
  return row && normalRow(row);
}

/** PostgreSQL answers bigints as strings: numbers, as the type says. */
const normalRow = (r: BlockRow): BlockRow => ({ ...r, id: Number(r.id), blockedAt: Number(r.blockedAt), liftedAt: r.liftedAt === null ? null : Number(r.liftedAt) });
