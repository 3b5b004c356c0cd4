/**
 * Matching a request against denylist rules (format.ts), in memory: what the denylist service
 * asks on every read and upload, so it must cost no I/O and little CPU, and lists of a million
 * lines (badbits) must fit.
 *
 * A `RuleSet` is one list, compiled: `/ipfs/` rules by their CID's multihash, double hashes by
 * hash function and hash (each key the bytes in hex: base58 encoding is slow), and per rule only
 * its line and whether it is an exception (the parsed Rule objects are not kept). Among the rules
 * of a list that match, the one written last wins (an `!` exception after a rule lifts it; a rule
 * after an exception blocks again); among lists, the later list's answer wins (`decide`).
 *
 * A `Query` is one CID and path, asked of every list: what it costs to ask — the multihash's key,
 * and while any list holds double hashes, the modern (`b58(multihash)[/path]`) and legacy
 * (`CIDv1-base32/path`) inputs hashed once per function — is computed once, when first needed.
 *
 * @example
 *   const list = new RuleSet("badbits.deny", rules)
 *   decide([list], new Query(CID.parse("bafy…"), ""))   // the winning rule, or undefined
 */
import { blake3 } from "@noble/hashes/blake3.js";
import { base58btc } from "multiformats/bases/base58";
import type { CID } from "multiformats/cid";
import * as Digest from "multiformats/hashes/digest";
import { multihashKey, pathMatches, SHA2_256, type Rule, type RulePath } from "./format.ts";

const BLAKE3 = 0x1e;

/** The hash functions a double-hashed rule may use here, by multicodec code. */
const HASHES: Record<number, (bytes: Uint8Array) => Uint8Array> = {
  [SHA2_256]: (bytes) => new Uint8Array(new Bun.CryptoHasher("sha256").update(bytes).digest()),
  [BLAKE3]: (bytes) => blake3(bytes),
};

/** Whether a double-hashed rule's function is one this gateway computes. */
export const hashSupported = (fn: number) => fn in HASHES;

/** The rule that decided: where it is written, and whether it is an exception. */
export interface Placed {
  /** The list it is in (a file's path, or "operator"). */
  source: string;
  line: number;
  allow: boolean;
}

/** A list as the service hands it over: its source and its rules. */
export interface SourceRules {
  source: string;
  rules: readonly Rule[];
}

const encoder = new TextEncoder();
const hex = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex");

/** The base58btc spellings of multihashes met lately (the modern double hash's input): base58 costs
 * ≈ 15–30 µs a time, and the same CIDs are asked for again and again. */
const B58_KEPT = 10_000;
const b58s = new Map<string, string>();
function b58Of(mh: Uint8Array, key: string): string {
  let text = b58s.get(key);
  if (text === undefined) {
    if (b58s.size >= B58_KEPT) b58s.clear();
    text = base58btc.baseEncode(mh);
    b58s.set(key, text);
  }
  return text;
}

/** One CID and path being checked; what each list needs of it is computed once. */
export class Query {
  /** The path below the CID, without leading or trailing `/` ("" for the CID itself). */
  readonly path: string;
  private key: string | undefined;
  private readonly doubles = new Map<number, string[]>();

  constructor(
    readonly cid: CID,
    path: string,
  ) {
    this.path = path;
  }

  /** The multihash's key (as `/ipfs/` rules are kept). */
  get multihash(): string {
    return (this.key ??= multihashKey(this.cid));
  }

  /** The double hashes of this CID and path with function `fn` (modern, then legacy), as kept. */
  doubleHashes(fn: number): string[] {
    let keys = this.doubles.get(fn);
    if (!keys) {
      const hash = HASHES[fn] as (b: Uint8Array) => Uint8Array;
      const mh = b58Of(this.cid.multihash.bytes, this.multihash);
      const modern = encoder.encode(this.path === "" ? mh : `${mh}/${this.path}`);
      // badbits' anchor: the CIDv1 (its own codec) in base32, then `/` and the path, even when empty.
      const legacy = encoder.encode(`${this.cid.toV1().toString()}/${this.path}`);
      keys = [modern, legacy].map((input) => hex(Digest.create(fn, hash(input)).bytes));
      this.doubles.set(fn, keys);
    }
    return keys;
  }
}

/** An `/ipfs/` rule as kept: its path part and its position in the list. */
interface PathRule extends RulePath {
  index: number;
}

export class RuleSet {
  private readonly byMultihash = new Map<string, PathRule[]>();
  /** Function → hash → the positions of the rules that name it. */
  private readonly doubles = new Map<number, Map<string, number | number[]>>();
  private readonly lines: number[] = [];
  private readonly allows: boolean[] = [];

  constructor(
    readonly source: string,
    rules: readonly Rule[] = [],
  ) {
    for (const rule of rules) this.add(rule);
  }

  /** Rules this list matches (ipfs and double-hashed rules of a supported function). */
  get size(): number {
    return this.lines.length;
  }

  /** Adds the next rule of the list (rules that are not matched here are passed over); whether it was kept. */
  add(rule: Rule): boolean {
    if (rule.kind !== "ipfs" && !(rule.kind === "double" && hashSupported(rule.fn))) return false;
    const index = this.lines.length;
    this.lines.push(rule.line);
    this.allows.push(rule.allow);
    if (rule.kind === "ipfs") {
      const at = this.byMultihash.get(rule.multihash);
      const kept = { path: rule.path, prefix: rule.prefix, index };
      if (at) at.push(kept);
      else this.byMultihash.set(rule.multihash, [kept]);
    } else {
      let byHash = this.doubles.get(rule.fn);
      if (!byHash) this.doubles.set(rule.fn, (byHash = new Map()));
      const at = byHash.get(rule.hash);
      byHash.set(rule.hash, at === undefined ? index : [...(Array.isArray(at) ? at : [at]), index]);
    }
    return true;
  }

  /** The functions of this list's double hashes. */
  get hashFunctions(): Iterable<number> {
    return this.doubles.keys();
  }

  /** This list's decision on `q`: its last matching rule, an exception or not; undefined when none matches. */
  match(q: Query): Placed | undefined {
    if (this.size === 0) return undefined;
    let best = -1;
    for (const r of this.byMultihash.get(q.multihash) ?? []) if (r.index > best && pathMatches(r, q.path)) best = r.index;
    for (const [fn, byHash] of this.doubles) {
      for (const key of q.doubleHashes(fn)) {
        const at = byHash.get(key);
        if (at === undefined) continue;
        for (const index of Array.isArray(at) ? at : [at]) if (index > best) best = index;
      }
    }
    return best < 0 ? undefined : { source: this.source, line: this.lines[best] as number, allow: this.allows[best] as boolean };
  }
}

/** The decision of `lists` (in their order: a later list's answer wins) on `q`: the rule that blocks, or undefined. */
export function decide(lists: readonly RuleSet[], q: Query): Placed | undefined {
  for (let i = lists.length - 1; i >= 0; i--) {
    const placed = (lists[i] as RuleSet).match(q);
    if (placed) return placed.allow ? undefined : placed;
  }
  return undefined;
}
