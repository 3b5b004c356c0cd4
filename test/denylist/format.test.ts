/**
 * The compact denylist format (IPIP-383) as this gateway reads and matches it, checked against the
 * examples of the specification and of its reference test list (ipfs-shipyard/nopfs
 * tester/test.deny): each rule blocks what they say it blocks, and nothing else. Also the
 * operator's spellings of a block (`stowage admin block`).
 */
import { describe, expect, test } from "bun:test";
import { base58btc } from "multiformats/bases/base58";
import { CID } from "multiformats/cid";
import { sha256 } from "multiformats/hashes/sha2";
import { DenylistFormatError, parseAnyCid, parseDenylist } from "../../src/denylist/format.ts";
import { BlockInputError, operatorRule } from "../../src/denylist/operator.ts";
import { decide, Query, RuleSet } from "../../src/denylist/rules.ts";

/** The examples, each with what its comments say it blocks. */
const LIST = `version: 1
name: "Testing denylist"
description: "examples of the specification"
author: "someone"
hints:
  gateway_status: 410
---
# rule1: by CID, any CID with its multihash
/ipfs/bafybeihvvulpp4evxj7x7armbqcyg6uezzuig6jp3lktpbovlqfkuqeuoq

# rule2: all subpaths, and the CID itself
/ipfs/QmdWFA9FL52hx3j9EJZPQP1ZUH8Ygi5tLCX2cRDs6knSf8/*

# rule3 and rule4: some subpaths
/ipfs/Qmah2YDTfrox4watLCr3YgKyBwvjq8FJZEFdWY6WtJ3Xt2/test*
/ipfs/QmTuvSQbEDR3sarFAN9kAeXBpiBCyYYNxdxciazBba11eC/test/*

# rule5: some subpaths, with exceptions
/ipfs/QmUboz9UsQBDeS6Tug1U8jgoFkgYxyYood9NDyVURAY9pK/blocked*
!/ipfs/QmUboz9UsQBDeS6Tug1U8jgoFkgYxyYood9NDyVURAY9pK/blockednot
!/ipfs/QmUboz9UsQBDeS6Tug1U8jgoFkgYxyYood9NDyVURAY9pK/blocked/not
!/ipfs/QmUboz9UsQBDeS6Tug1U8jgoFkgYxyYood9NDyVURAY9pK/blocked/exceptions*

# rule6-8: IPNS, read and never matched here
/ipns/domain.example
/ipns/domain2.example/path
/ipns/k51qzi5uqu5dhmzyv3zac033i7rl9hkgczxyl81lwoukda2htteop7d3x0y1mf

# rule10: legacy double hash of a CID: sha256("bafybeiefwq…/")
//d9d295bde21f422d471a90f2a37ec53049fdf3e5fa3ee2e8f20e10003da429e7

# rule11: legacy double hash of a path: sha256("bafybeiefwq…/path")
//3f8b9febd851873b3774b937cce126910699ceac56e72e64b866f8e258d09572

# rule12: double hash of a CID's multihash
//QmX9dhRcQcKUw3Ws8485T5a9dtjrSCQaUAHnG4iK9i4ceM

# rule13: double hash of a path below a blake3 CID
//QmbK7LDv5NNBvYQzNfm2eED17SNLt1yNMapcUhSuNLgkqz
`;

const parsed = parseDenylist(LIST);
const set = new RuleSet("test.deny", parsed.rules);
/** The rule of `lists` that blocks `cid` with `path`, if any. */
const blockingIn = (lists: RuleSet[], cid: CID, path = "") => decide(lists, new Query(cid, path));
const blocked = (cid: string, path = "") => blockingIn([set], parseAnyCid(cid), path) !== undefined;

describe("parse", () => {
  test("the header's fields; every rule, none skipped, with its line number", () => {
    expect(parsed.header).toEqual({ version: 1, name: "Testing denylist", description: "examples of the specification", author: "someone", hints: { gateway_status: "410" } });
    expect(parsed.problems).toEqual([]);
    expect(parsed.rules).toHaveLength(15);
    expect(parsed.rules[0]).toMatchObject({ line: 9, kind: "ipfs", allow: false, path: "", prefix: false });
    expect(parsed.rules.filter((r) => r.kind === "unused")).toHaveLength(3);
    expect(parsed.rules.filter((r) => r.allow)).toHaveLength(3);
  });

  test("no header at all; a line that is no rule is reported with its number and skipped", () => {
    const list = parseDenylist("/ipfs/bafybeihvvulpp4evxj7x7armbqcyg6uezzuig6jp3lktpbovlqfkuqeuoq\n\nipfs/nope\n/ipfs/not-a-cid\n//zzz\n");
    expect(list.header).toEqual({ version: 1, hints: {} });
    expect(list.rules).toHaveLength(1);
    expect(list.problems.map((p) => p.line)).toEqual([3, 4, 5]);
  });

  test("a header that is not YAML, or of another version, refuses the list", () => {
    expect(() => parseDenylist("version: [1\n---\n")).toThrow(DenylistFormatError);
    expect(() => parseDenylist("version: 2\n---\n")).toThrow(DenylistFormatError);
    expect(() => parseDenylist("/ipfs/bafy\n/ipfs/bafy2\n---\n")).toThrow(DenylistFormatError);
  });

  test("CRLF lines, hints after a rule, +/- exceptions as Kubo reads them", () => {
    const list = parseDenylist("/ipfs/bafybeihvvulpp4evxj7x7armbqcyg6uezzuig6jp3lktpbovlqfkuqeuoq/a%20b/ reason:legal\r\n-/ipfs/bafybeihvvulpp4evxj7x7armbqcyg6uezzuig6jp3lktpbovlqfkuqeuoq/a%20b\r\n");
    expect(list.rules.map((r) => ({ path: r.path, allow: r.allow }))).toEqual([
      { path: "a b", allow: false },
      { path: "a b", allow: true },
    ]);
  });
});

describe("match", () => {
  test("a CID rule blocks its multihash in every version, codec and base — and not its paths", () => {
    expect(blocked("bafybeihvvulpp4evxj7x7armbqcyg6uezzuig6jp3lktpbovlqfkuqeuoq")).toBe(true);
    expect(blocked("bafkreihvvulpp4evxj7x7armbqcyg6uezzuig6jp3lktpbovlqfkuqeuoq")).toBe(true);
    expect(blocked("QmesfgDQ3q6prBy2Kg2gKbW4MAGuWiRP2DVuGA5MZSERLo")).toBe(true);
    expect(blocked("bafybeihvvulpp4evxj7x7armbqcyg6uezzuig6jp3lktpbovlqfkuqeuoq", "sub")).toBe(false);
  });

  test("/* blocks the CID and every path; path* every path starting so", () => {
    expect(blocked("QmdWFA9FL52hx3j9EJZPQP1ZUH8Ygi5tLCX2cRDs6knSf8")).toBe(true);
    expect(blocked("QmdWFA9FL52hx3j9EJZPQP1ZUH8Ygi5tLCX2cRDs6knSf8", "a/b")).toBe(true);
    expect(blocked("Qmah2YDTfrox4watLCr3YgKyBwvjq8FJZEFdWY6WtJ3Xt2", "test")).toBe(true);
    expect(blocked("Qmah2YDTfrox4watLCr3YgKyBwvjq8FJZEFdWY6WtJ3Xt2", "test2/x")).toBe(true);
    expect(blocked("Qmah2YDTfrox4watLCr3YgKyBwvjq8FJZEFdWY6WtJ3Xt2", "tes")).toBe(false);
    expect(blocked("Qmah2YDTfrox4watLCr3YgKyBwvjq8FJZEFdWY6WtJ3Xt2")).toBe(false);
    expect(blocked("QmTuvSQbEDR3sarFAN9kAeXBpiBCyYYNxdxciazBba11eC", "test/a")).toBe(true);
  });

  test("exceptions: the last matching rule wins", () => {
    const c = "QmUboz9UsQBDeS6Tug1U8jgoFkgYxyYood9NDyVURAY9pK";
    expect(blocked(c, "blocked")).toBe(true);
    expect(blocked(c, "blocked/x")).toBe(true);
    expect(blocked(c, "blockednot")).toBe(false);
    expect(blocked(c, "blocked/not")).toBe(false);
    expect(blocked(c, "blocked/exceptions/deep")).toBe(false);
    expect(blocked(c)).toBe(false);
    // A rule after the exception blocks again.
    const again = new RuleSet("a", parseDenylist(`!/ipfs/${c}/x\n/ipfs/${c}/x\n`).rules);
    expect(blockingIn([again], parseAnyCid(c), "x")).toBeDefined();
  });

  test("double hashes: legacy hex of CIDv1/path, modern multihash of b58(multihash)[/path], any base of the CID", () => {
    expect(blocked("bafybeiefwqslmf6zyyrxodaxx4vwqircuxpza5ri45ws3y5a62ypxti42e")).toBe(true);
    expect(blocked("bafybeiefwqslmf6zyyrxodaxx4vwqircuxpza5ri45ws3y5a62ypxti42e", "path")).toBe(true);
    expect(blocked("bafybeiefwqslmf6zyyrxodaxx4vwqircuxpza5ri45ws3y5a62ypxti42e", "path2")).toBe(false);
    expect(blocked("bafybeidjwik6im54nrpfg7osdvmx7zojl5oaxqel5cmsz46iuelwf5acja")).toBe(true);
    expect(blocked("QmVTF1yEejXd9iMgoRTFDxBv7HAz9kuZcQNBzHrceuK9HR")).toBe(true);
    expect(blocked("bafyb4ieqht3b2rssdmc7sjv2cy2gfdilxkfh7623nvndziyqnawkmo266a", "path")).toBe(true);
    expect(blocked("f01701e20903cf61d46521b05f926ba1634628d0bba8a7ffb5b6d5a3ca310682ca63b5ef0", "path")).toBe(true);
    expect(blocked("bafyb4ieqht3b2rssdmc7sjv2cy2gfdilxkfh7623nvndziyqnawkmo266a", "path2")).toBe(false);
  });

  test("the specification's own worked example of a double-hashed path", () => {
    const s = new RuleSet("x", parseDenylist("//QmSju6XPmYLG611rmK7rEeCMFVuL6EHpqyvmEU6oGx3GR8\n").rules);
    const c = CID.parse("bafybeihrw75yfhdx5qsqgesdnxejtjybscwuclpusvxkuttep6h7pkgmze");
    expect(blockingIn([s], c, "my/path")).toBeDefined();
    expect(blockingIn([s], c, "my")).toBeUndefined();
    expect(blockingIn([s], c)).toBeUndefined();
  });

  test("a blake3 double hash is computed too", async () => {
    const { blake3 } = await import("@noble/hashes/blake3.js");
    const c = CID.parse("bafkreihvvulpp4evxj7x7armbqcyg6uezzuig6jp3lktpbovlqfkuqeuoq");
    const input = new TextEncoder().encode(base58btc.baseEncode(c.multihash.bytes));
    const mh = Uint8Array.from([0x1e, 32, ...blake3(input)]);
    const s = new RuleSet("x", parseDenylist(`//${base58btc.baseEncode(mh)}\n`).rules);
    expect(blockingIn([s], c)).toBeDefined();
  });

  test("the rule that decides says where it is", () => {
    expect(blockingIn([set], parseAnyCid("QmVTF1yEejXd9iMgoRTFDxBv7HAz9kuZcQNBzHrceuK9HR"))).toEqual({ source: "test.deny", line: 36, allow: false });
  });

  test("among lists, the later one's answer wins: its exception lifts an earlier list's rule, its rule blocks", () => {
    const c = CID.parse("bafybeihvvulpp4evxj7x7armbqcyg6uezzuig6jp3lktpbovlqfkuqeuoq");
    const exception = new RuleSet("later.deny", parseDenylist(`!/ipfs/${c}\n`).rules);
    expect(blockingIn([set, exception], c)).toBeUndefined();
    expect(blockingIn([exception, set], c)).toEqual({ source: "test.deny", line: 9, allow: false });
  });
});

describe("the operator's spellings", () => {
  test("a CID, a CID with a path, a /ipfs/ rule, a double hash: one key per meaning", async () => {
    const v1 = "bafybeihvvulpp4evxj7x7armbqcyg6uezzuig6jp3lktpbovlqfkuqeuoq";
    expect(operatorRule(v1).text).toBe(`/ipfs/${v1}`);
    expect(operatorRule(v1).key).toBe(operatorRule("QmesfgDQ3q6prBy2Kg2gKbW4MAGuWiRP2DVuGA5MZSERLo").key);
    expect(operatorRule(`${v1}/a/b*`).rule).toMatchObject({ path: "a/b", prefix: true });
    expect(operatorRule(`/ipfs/${v1}/a/`).key).toBe(operatorRule(`${v1}/a`).key);
    const hash = base58btc.baseEncode((await sha256.digest(new TextEncoder().encode("x"))).bytes);
    expect(operatorRule(`//${hash}`).rule.kind).toBe("double");
    for (const bad of ["", "not-a-cid", `!/ipfs/${v1}`, "/ipns/example.com", "//zz", `${v1} x`]) expect(() => operatorRule(bad)).toThrow(BlockInputError);
  });
});
