/**
 * The key-value store under the state trie: every trie node and contract code ever written, kept
 * in memory and collected so each mined block can journal exactly the entries it added. Nothing
 * is pruned, so the state of every earlier block stays readable (eth_call at a block number).
 */
import type { BatchDBOp, DB } from "@ethereumjs/util";

type Value = string | Uint8Array;

const toBytes = (v: Value): Uint8Array => (typeof v === "string" ? Buffer.from(v, "hex") : v);

/** Both stores take a batch as its puts and deletes in order; only `put` and `del` differ. */
async function applyBatch(db: Pick<DB<string, Value>, "put" | "del">, ops: BatchDBOp<string, Value>[]) {
  for (const op of ops) {
    if (op.type === "put") await db.put(op.key, op.value);
    else await db.del(op.key);
  }
}

export class NodeStore implements DB<string, Value> {
  readonly entries = new Map<string, Uint8Array>();
  private pending: [string, Uint8Array | null][] = [];

  async get(key: string) {
    return this.entries.get(key);
  }
  async put(key: string, value: Value) {
    const bytes = toBytes(value);
    this.entries.set(key, bytes);
    this.pending.push([key, bytes]);
  }
  async del(key: string) {
    this.entries.delete(key);
    this.pending.push([key, null]);
  }
  batch(ops: BatchDBOp<string, Value>[]) {
    return applyBatch(this, ops);
  }
  shallowCopy(): DB<string, Value> {
    return this;
  }
  async open() {}

  /** What was written since the last call, as journal entries (base64 values, null = deleted). */
  takePending(): [string, string | null][] {
    const out = this.pending.map(([k, v]): [string, string | null] => [k, v === null ? null : Buffer.from(v).toString("base64")]);
    this.pending = [];
    return out;
  }

  load(entries: [string, string | null][]) {
    for (const [k, v] of entries) {
      if (v === null) this.entries.delete(k);
      else this.entries.set(k, new Uint8Array(Buffer.from(v, "base64")));
    }
  }
}

/** Where an overlay reads what it did not write: the chain's own store, or the simulation
 * thread's copy that fetches from it. */
export interface NodeSource {
  get(key: string): Promise<Uint8Array | undefined>;
}

/** Reads through to the store, keeps its own writes: an eth_call or a gas estimate runs real
 * transactions on it and leaves the chain untouched. */
export class OverlayStore implements DB<string, Value> {
  private readonly own = new Map<string, Uint8Array | null>();
  constructor(private readonly base: NodeSource) {}

  async get(key: string) {
    const mine = this.own.get(key);
    if (mine !== undefined) return mine ?? undefined;
    return this.base.get(key);
  }
  async put(key: string, value: Value) {
    this.own.set(key, toBytes(value));
  }
  async del(key: string) {
    this.own.set(key, null);
  }
  batch(ops: BatchDBOp<string, Value>[]) {
    return applyBatch(this, ops);
  }
  shallowCopy(): DB<string, Value> {
    return this;
  }
  async open() {}
}
