/**
 * The compact denylist format (IPIP-383, ipfs/specs "Compact Denylist Format"), parsed: an
 * optional YAML header ended by a `---` line (at most 1 MiB; `version` 1 or absent, `name`,
 * `description`, `author`, `hints`), then one rule per line. Comments start with `#`; a rule
 * starting with `!` is an exception (an allow rule), and the last rule that matches wins.
 *
 * Rules this gateway acts on:
 * - `/ipfs/CID` — the CID's multihash, whatever its version or codec;
 * - `/ipfs/CID/PATH` — that exact path below it (percent-encoded, trailing `/` ignored);
 * - `/ipfs/CID/PATH*` and `/ipfs/CID/PATH/*` — any path starting so (`/ipfs/CID/*`: the CID too);
 * - `//HASH` — double-hashed: a base58btc multihash of `b58(multihash)[/PATH]` (any hash function
 *   named by the multihash; sha2-256 and blake3 are computed here), or the legacy hex SHA-256 of
 *   `CIDv1-base32/PATH` (the badbits anchor, trailing `/` kept for an empty path).
 * `/ipns/…` rules and bare-path rules are read and counted, never matched: this gateway serves no
 * IPNS and resolves no name. A line it cannot read is reported with its number and skipped, as
 * the specification allows; a header that is not YAML, or names another version, refuses the list.
 *
 * Pure: text in, rules out (files.ts reads files, rules.ts matches).
 *
 * @example
 *   const list = parseDenylist("version: 1\n---\n/ipfs/bafy…\n!/ipfs/bafy…/ok\n//QmX9…\n")
 *   list.rules.length // 3
 */
import { base58btc } from "multiformats/bases/base58";
import { bases } from "multiformats/basics";
import { CID } from "multiformats/cid";
import type { MultibaseDecoder } from "multiformats/bases/interface";
import * as Digest from "multiformats/hashes/digest";

/** The header's size limit (1 MiB) and a line's (2 MiB, its newline included). */
export const MAX_HEADER = 1 << 20;
export const MAX_LINE = 2 << 20;

export const SHA2_256 = 0x12;

export interface ListHeader {
  version: number;
  name?: string;
  description?: string;
  author?: string;
  hints: Record<string, string>;
}

/** The path part of a rule: unescaped, without leading or trailing `/`; `prefix` for a trailing `*`. */
export interface RulePath {
  path: string;
  prefix: boolean;
}

interface RuleBase extends RulePath {
  /** An exception (`!` before the rule): what it matches is not blocked. */
  allow: boolean;
  /** 1-based line number in its list. */
  line: number;
  /** The line as written. */
  text: string;
}

export type Rule =
  /** `/ipfs/CID[/PATH]`: `multihash` is the CID's multihash (`multihashKey`). */
  | (RuleBase & { kind: "ipfs"; multihash: string })
  /** `//HASH`: `hash` is a multihash (`hexKey`) made with the function `fn` (a multicodec code). */
  | (RuleBase & { kind: "double"; fn: number; hash: string })
  /** `/ipns/…` and bare paths: read, never matched here. */
  | (RuleBase & { kind: "unused" });

export interface Problem {
  line: number;
  message: string;
}

export interface ParsedList {
  header: ListHeader;
  rules: Rule[];
  /** Lines that are no rule this format knows, each skipped. */
  problems: Problem[];
}

/** A list this gateway must refuse whole (a header that is not YAML, another version). */
export class DenylistFormatError extends Error {
  override name = "DenylistFormatError";
}

/** Every multibase multiformats knows (lists name CIDs in base16, base36, … too). */
const anyBase: MultibaseDecoder<string> = {
  decode(text) {
    const base = Object.values(bases).find((b) => text.startsWith(b.prefix));
    if (!base) throw new Error(`no multibase with the prefix ${JSON.stringify(text.slice(0, 1))}`);
    return base.decoder.decode(text);
  },
};

/** A CID in any multibase (or a CIDv0). */
export const parseAnyCid = (text: string) => CID.parse(text, text.startsWith("Qm") || text.startsWith("1") ? undefined : anyBase);

/** Multihash bytes as rules are kept and looked up: hex (base58, the format's own spelling, costs
 * ≈ 20× more to make, and a check makes one per rule kind). */
export const hexKey = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex");

/** A CID's multihash as `/ipfs/` rules are kept: whatever its version, codec or base. */
export const multihashKey = (cid: CID) => hexKey(cid.multihash.bytes);

/** `/a/b/` → `a/b`, percent-decoded (RFC 3986); a trailing `*` or `/*` makes it a prefix. */
export function rulePath(raw: string): RulePath {
  let text = raw;
  let prefix = false;
  // The `*` is looked for before decoding: an encoded `%2A` is a star in a name, not a wildcard.
  if (text.endsWith("/*")) [text, prefix] = [text.slice(0, -2), true];
  else if (text.endsWith("*")) [text, prefix] = [text.slice(0, -1), true];
  return { path: trimSlashes(decodeURIComponent(text)), prefix };
}

export const trimSlashes = (p: string) => p.replace(/^\/+/, "").replace(/\/+$/, "");

/** Whether a rule's path matches `path` (already without leading or trailing `/`). */
export function pathMatches(rule: RulePath, path: string): boolean {
  if (rule.prefix) return path.startsWith(rule.path);
  return rule.path === path;
}

/** The header of `text` and where its rules begin (`body`, whose first line is `firstLine`), or an
 * empty header when there is none. Throws DenylistFormatError for a header it must refuse. */
export function readHeader(text: string): { header: ListHeader; body: string; firstLine: number } {
  const empty: ListHeader = { version: 1, hints: {} };
  const head = text.slice(0, MAX_HEADER);
  const m = /^---\r?$/m.exec(head);
  if (!m) return { header: empty, body: text, firstLine: 1 };
  const yaml = text.slice(0, m.index);
  let parsed: unknown;
  try {
    parsed = yaml.trim() === "" ? {} : Bun.YAML.parse(yaml);
  } catch (err) {
    throw new DenylistFormatError(`the header is not YAML: ${(err as Error).message}`);
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw new DenylistFormatError("the header is not a YAML map");
  const fields = parsed as Record<string, unknown>;
  const version = fields.version === undefined ? 1 : Number(fields.version);
  if (version !== 1) throw new DenylistFormatError(`version ${String(fields.version)} is not supported (only 1)`);
  const str = (v: unknown) => (typeof v === "string" || typeof v === "number" ? String(v) : undefined);
  const hints: Record<string, string> = {};
  if (fields.hints && typeof fields.hints === "object" && !Array.isArray(fields.hints)) {
    for (const [k, v] of Object.entries(fields.hints)) if (str(v) !== undefined) hints[k] = str(v) as string;
  }
  const header: ListHeader = { version, name: str(fields.name), description: str(fields.description), author: str(fields.author), hints };
  const bodyStart = m.index + m[0].length + 1;
  return { header, body: text.slice(bodyStart), firstLine: yaml.split("\n").length + 1 };
}

/** One line (without its newline) as its rules (one, or two for a double-hash that reads both
 * ways); none for a comment or an empty line. */
export function parseRule(line: string, number: number): Rule[] {
  const trimmed = line.replace(/\r$/, "").trim();
  if (trimmed === "" || trimmed.startsWith("#")) return [];
  // The rule is the first field; hints (`key:value` or `key=value`) may follow, and are not used.
  let rule = trimmed.split(/\s+/)[0] as string;
  let allow = false;
  // `!` is the specification's exception; `+` and `-` are older spellings that Kubo also reads.
  if (/^[!+-]/.test(rule)) [rule, allow] = [rule.slice(1), true];
  const base = { allow, line: number, text: trimmed };

  if (rule.startsWith("//")) {
    const hash = rule.slice(2);
    const found: Rule[] = [];
    const double = (fn: number, mh: Uint8Array): Rule => ({ ...base, kind: "double", fn, hash: hexKey(mh), path: "", prefix: false });
    const hex = HEX64.test(hash);
    // Hex with a 0 in it is no base58 (most badbits lines): not tried, as a throw costs.
    if (!hex || BASE58.test(hash)) {
      try {
        const mh = Digest.decode(base58btc.baseDecode(hash));
        found.push(double(mh.code, mh.bytes));
      } catch {
        // not a base58btc multihash: maybe the legacy hex form below
      }
    }
    // A text that reads both ways is both rules, as the specification asks.
    if (hex) found.push(double(SHA2_256, Digest.create(SHA2_256, Buffer.from(hash, "hex")).bytes));
    if (found.length === 0) throw new Error("a double-hash is neither a base58btc multihash nor 64 hex digits of SHA-256");
    return found;
  }
  if (rule.startsWith("/ipfs/") || rule.startsWith("/ipld/")) {
    const rest = rule.slice(6);
    const slash = rest.indexOf("/");
    const cidText = slash < 0 ? rest : rest.slice(0, slash);
    let cid: CID;
    try {
      cid = parseAnyCid(cidText);
    } catch {
      throw new Error(`not a CID: ${cidText}`);
    }
    let path: RulePath;
    try {
      path = rulePath(slash < 0 ? "" : rest.slice(slash + 1));
    } catch {
      throw new Error("the path is not percent-encoded");
    }
    return [{ ...base, kind: "ipfs", multihash: multihashKey(cid), ...path }];
  }
  if (rule.startsWith("/")) return [{ ...base, kind: "unused", path: "", prefix: false }];
  throw new Error("a rule starts with /ipfs/, /ipns/, / or //");
}

const HEX64 = /^[0-9a-fA-F]{64}$/;
const BASE58 = /^[1-9A-HJ-NP-Za-km-z]+$/;

/** The rules of a list's body, line by line (`rules`, or the `problem` of a line that is none). */
export function* bodyLines(body: string, firstLine: number): Generator<{ line: number; rules: Rule[] } | { line: number; problem: string }> {
  for (let at = 0, number = firstLine; at <= body.length; number++) {
    const end = body.indexOf("\n", at);
    const line = body.slice(at, end < 0 ? body.length : end);
    at = end < 0 ? body.length + 1 : end + 1;
    if (line.length + 1 > MAX_LINE) {
      yield { line: number, problem: "longer than 2 MiB" };
      continue;
    }
    try {
      yield { line: number, rules: parseRule(line, number) };
    } catch (err) {
      yield { line: number, problem: (err as Error).message };
    }
  }
}

/** Parses a whole list at once (files.ts reads large ones a slice at a time). Throws
 * DenylistFormatError for a header it must refuse. */
export function parseDenylist(text: string): ParsedList {
  const { header, body, firstLine } = readHeader(text);
  const rules: Rule[] = [];
  const problems: Problem[] = [];
  for (const item of bodyLines(body, firstLine)) {
    if ("problem" in item) problems.push({ line: item.line, message: item.problem });
    else rules.push(...item.rules);
  }
  return { header, rules, problems };
}
