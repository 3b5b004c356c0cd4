/**
 * Matching a request against denylist rules (format.ts), in memory: what the denylist service
 * asks on every read and upload, so it must cost no I/O and little CPU.
 *
 * Rules are indexed by what they name — `/ipfs/` rules by the CID's multihash (base58btc), double
 * hashes by hash function and hash — so a check is a few map lookups, plus, while the lists hold
 * double-hashed rules, two hashes per function in use (the modern `b58(multihash)[/path]` and the
 * legacy `CIDv1-base32/path`). Among the rules that match, the one written last wins (an `!`
 * exception after a rule lifts it; a rule after an exception blocks again), across lists in the
 * order they are given.
 *
 * @example
 *   const set = new RuleSet([{ source: "badbits.deny", rules }])
 *   set.match(CID.parse("bafy…"), "")        // the winning rule, or undefined
 */
import { blake3 } from "@noble/hashes/blake3.js";
import { base58btc } from "multiformats/bases/base58";
import type { CID } from "multiformats/cid";
import * as Digest from "multiformats/hashes/digest";
import { multihashKey, pathMatches, SHA2_256, type Rule } from "./format.ts";

const BLAKE3 = 0x1e;

/** The hash functions a double-hashed rule may use here, by multicodec code. */
const HASHES: Record<number, (bytes: Uint8Array) => Uint8Array> = {
  [SHA2_256]: (bytes) => new Uint8Array(new Bun.CryptoHasher("sha256").update(bytes).digest()),
  [BLAKE3]: (bytes) => blake3(bytes),
};

/** Whether a double-hashed rule's function is one this gateway computes. */
export const hashSupported = (fn: number) => fn in HASHES;

/** A rule with where it came from. */
export interface Placed {
  rule: Rule;
  /** The list it is in (a file's path, or "operator"). */
  source: string;
  /** Its position among all the lists' rules: the higher wins. */
  order: number;
}

export interface SourceRules {
  source: string;
  rules: readonly Rule[];
}

const encoder = new TextEncoder();

export class RuleSet {
  private readonly byMultihash = new Map<string, Placed[]>();
  private readonly doubles = new Map<number, Map<string, Placed[]>>();
  /** Rules this set matches (ipfs and double-hashed rules of a supported function). */
  readonly size: number;

  constructor(lists: readonly SourceRules[]) {
    let order = 0;
    let size = 0;
    const add = (map: Map<string, Placed[]>, key: string, placed: Placed) => {
      const at = map.get(key);
      if (at) at.push(placed);
      else map.set(key, [placed]);
      size++;
    };
    for (const { source, rules } of lists) {
      for (const rule of rules) {
        const placed = { rule, source, order: order++ };
        if (rule.kind === "ipfs") add(this.byMultihash, rule.multihash, placed);
        else if (rule.kind === "double" && hashSupported(rule.fn)) {
          let byHash = this.doubles.get(rule.fn);
          if (!byHash) this.doubles.set(rule.fn, (byHash = new Map()));
          add(byHash, rule.hash, placed);
        }
      }
    }
    this.size = size;
  }

  /**
   * The rule that decides `cid` with `path` below it (without leading or trailing `/`; "" for
   * the CID itself): the last matching rule, an exception or not; undefined when none matches.
   */
  match(cid: CID, path: string): Placed | undefined {
    if (this.size === 0) return undefined;
    let best: Placed | undefined;
    const consider = (placed: Placed | undefined) => {
      if (placed && (!best || placed.order > best.order)) best = placed;
    };
    const mh = multihashKey(cid);
    for (const placed of this.byMultihash.get(mh) ?? []) if (pathMatches(placed.rule, path)) consider(placed);
    if (this.doubles.size > 0) {
      const modern = encoder.encode(path === "" ? mh : `${mh}/${path}`);
      // badbits' anchor: the CIDv1 (its own codec) in base32, then `/` and the path, even when empty.
      const legacy = encoder.encode(`${cid.toV1().toString()}/${path}`);
      for (const [fn, byHash] of this.doubles) {
        const hash = HASHES[fn] as (b: Uint8Array) => Uint8Array;
        for (const input of [modern, legacy]) {
          const key = base58btc.baseEncode(Digest.create(fn, hash(input)).bytes);
          for (const placed of byHash.get(key) ?? []) consider(placed);
        }
      }
    }
    return best;
  }

  /** The rule that blocks `cid` (with `path`), or undefined when it is not blocked. */
  blocking(cid: CID, path = ""): Placed | undefined {
    const rule = this.match(cid, path);
    return rule && !rule.rule.allow ? rule : undefined;
  }
}
