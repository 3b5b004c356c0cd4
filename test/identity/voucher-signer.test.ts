/**
 * The fast voucher recovery (src/identity/voucher-signer.ts) must answer exactly as viem's
 * recoverTypedDataAddress, which it replaces on the download path: same payer for every valid
 * voucher, and a refusal exactly where viem throws (bad v, wrong length, r or s out of range,
 * r not on the curve); high-s signatures are recovered by both (no low-s rule in recovery). Its
 * digest is viem's hashTypedData of `Voucher(seller, size, cid, expires)`, and the old two-field
 * voucher's (recognised only, to name the new type to old clients) is viem's of that type.
 */
import { describe, expect, test } from "bun:test";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { bytesToHex, hashTypedData, hexToBytes, numberToHex, recoverTypedDataAddress, type Address, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { legacyVoucherTypes, storageTypes } from "../../src/identity/eip712.ts";
import { recoverLogin } from "../../src/identity/signer.ts";
import { legacyVoucherSigner, voucherDigest, voucherSigner, type VoucherTerms } from "../../src/identity/voucher-signer.ts";
import { domains, orRefused, withV } from "./support.ts";

const N = secp256k1.Point.CURVE().n;
const seller: Address = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

const viemPayer = (domain: (typeof domains)[number], v: VoucherTerms, signature: Hex) =>
  orRefused(() => recoverTypedDataAddress({ domain, types: storageTypes, primaryType: "Voucher", message: { seller, ...v }, signature }));
const fastPayer = (recover: ReturnType<typeof voucherSigner>, v: VoucherTerms, signature: Hex) => orRefused(() => recover(v, signature));

const pick = <T>(values: readonly T[]): T => values[Math.floor(Math.random() * values.length)]!;
// uint256: the words above the lowest 64 bits are encoded too.
const randomSize = () => pick([0n, 1n, (1n << 64n) - 1n, 1n << 64n, (1n << 256n) - 1n, BigInt(Math.floor(Math.random() * Number.MAX_SAFE_INTEGER)), BigInt(bytesToHex(crypto.getRandomValues(new Uint8Array(32))))]);
const randomCid = () =>
  pick(["bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4", "bafybeiasb5vpmaounyilfuxbd3lryvosl4yefqrfahsb2esg46q6tu6y5q", "", "x", "é–ü", `bafkrei${bytesToHex(crypto.getRandomValues(new Uint8Array(20))).slice(2)}`]);
const randomExpiry = () => pick([0n, 1n, 1_900_000_000n, (1n << 64n) - 1n, BigInt(Math.floor(Math.random() * 2 ** 40))]);
const randomTerms = (): VoucherTerms => ({ size: randomSize(), cid: randomCid(), expires: randomExpiry() });
const hex32 = (n: bigint) => numberToHex(n, { size: 32 }).slice(2);

describe("voucherSigner", () => {
  test("the digest GET /traffichash answers is viem's hashTypedData of the voucher, on two domains; a digest reused for another voucher is that voucher's", () => {
    const digests = domains.map((domain) => voucherDigest(domain, seller));
    for (let i = 0; i < 400; i++) {
      const domain = domains[i % 2]!;
      const terms = randomTerms();
      expect(bytesToHex(digests[i % 2]!(terms))).toBe(hashTypedData({ domain, types: storageTypes, primaryType: "Voucher", message: { seller, ...terms } }));
    }
    expect(() => digests[0]!({ size: 1n << 256n, cid: "", expires: 0n })).toThrow();
    expect(() => digests[0]!({ size: -1n, cid: "", expires: 0n })).toThrow();
    expect(() => digests[0]!({ size: 0n, cid: "", expires: 1n << 64n })).toThrow();
  });

  test("each field counts: another Cid, size or expiry is another digest", () => {
    const digest = voucherDigest(domains[0]!, seller);
    const base = { size: 1000n, cid: "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4", expires: 0n };
    const seen = new Set([base, { ...base, cid: "bafybeiasb5vpmaounyilfuxbd3lryvosl4yefqrfahsb2esg46q6tu6y5q" }, { ...base, size: 1001n }, { ...base, expires: 1n }].map((v) => bytesToHex(digest(v))));
    expect(seen.size).toBe(4);
  });

  test("the old two-field voucher is recovered as viem recovers it under its own type, and is not the new one", async () => {
    for (let i = 0; i < 40; i++) {
      const domain = domains[i % 2]!;
      const account = privateKeyToAccount(generatePrivateKey());
      const size = BigInt(Math.floor(Math.random() * Number.MAX_SAFE_INTEGER));
      const sig = await account.signTypedData({ domain, types: legacyVoucherTypes, primaryType: "Voucher", message: { seller, size } });
      expect(legacyVoucherSigner(domain, seller)(size, sig)).toBe(account.address);
      // As the new type, it names some other key: never its signer.
      expect(await fastPayer(voucherSigner(domain, seller), { size, cid: "", expires: 0n }, sig)).not.toBe(account.address);
    }
    expect(() => legacyVoucherSigner(domains[0]!, seller)(1n << 64n, `0x${"11".repeat(65)}`)).toThrow();
  });

  test("recovers what viem recovers for random keys, sizes and v forms, on two domains", async () => {
    let same = 0;
    for (let i = 0; i < 200; i++) {
      const domain = domains[i % 2]!;
      const recover = voucherSigner(domain, seller);
      const account = privateKeyToAccount(generatePrivateKey());
      const terms = randomTerms();
      const sig = await account.signTypedData({ domain, types: storageTypes, primaryType: "Voucher", message: { seller, ...terms } });
      const v = Number.parseInt(sig.slice(130), 16);
      for (const form of [sig, withV(sig, v - 27)]) {
        const fast = await fastPayer(recover, terms, form);
        expect(fast).toBe(account.address);
        expect(fast).toBe(await viemPayer(domain, terms, form));
        same++;
      }
      // The same signature over another file recovers some other key, the same one for both.
      const other = { ...terms, cid: `${terms.cid}x` };
      const moved = await fastPayer(recover, other, sig);
      expect(moved).not.toBe(account.address);
      expect(moved).toBe(await viemPayer(domain, other, sig));
    }
    expect(same).toBe(400);
    // 200 keys signing and 800 recoveries in two libraries: seconds on a loaded machine.
  }, 30_000);

  test("malformed signatures: refused exactly where viem refuses, otherwise the same answer", async () => {
    const domain = domains[0]!;
    const recover = voucherSigner(domain, seller);
    const account = privateKeyToAccount(generatePrivateKey());
    const terms: VoucherTerms = { size: 1_048_576n, cid: "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4", expires: 1_900_000_000n };
    const sig = await account.signTypedData({ domain, types: storageTypes, primaryType: "Voucher", message: { seller, ...terms } });
    const r = BigInt(`0x${sig.slice(2, 66)}`);
    const s = BigInt(`0x${sig.slice(66, 130)}`);
    const v = Number.parseInt(sig.slice(130), 16);
    const random65 = () => bytesToHex(crypto.getRandomValues(new Uint8Array(65)));
    const cases: Hex[] = [
      ...[2, 3, 26, 29, 35, 36, 255].map((bad) => withV(sig, bad)),
      `0x${hex32(r)}${hex32(N - s)}${(55 - v).toString(16)}` as Hex, // high-s, parity flipped: the same key
      `0x${hex32(r)}${hex32(N - s)}${v.toString(16)}` as Hex, // high-s, parity kept: another key
      `0x${hex32(0n)}${hex32(s)}${v.toString(16)}` as Hex,
      `0x${hex32(r)}${hex32(0n)}${v.toString(16)}` as Hex,
      `0x${hex32(N)}${hex32(s)}${v.toString(16)}` as Hex,
      `0x${hex32(r)}${hex32(N)}${v.toString(16)}` as Hex,
      `0x${hex32(N + 1n)}${hex32(s)}${v.toString(16)}` as Hex,
      `0x${hex32((1n << 256n) - 1n)}${hex32(s)}${v.toString(16)}` as Hex,
      sig.slice(0, 130) as Hex, // 64 bytes
      `${sig}00` as Hex, // 66 bytes
      "0x" as Hex,
      `${sig.slice(0, 129)}g` as Hex,
      ...Array.from({ length: 60 }, random65),
      ...Array.from({ length: 20 }, () => withV(random65(), 27 + (Math.random() < 0.5 ? 0 : 1))),
    ];
    // r values whose x is not on the curve exist among small integers: viem refuses those too.
    for (let x = 1n; x < 12n; x++) cases.push(`0x${hex32(x)}${hex32(s)}1b` as Hex);
    const answers = new Set<string>();
    for (const c of cases) {
      const fast = await fastPayer(recover, terms, c);
      expect({ c, fast }).toEqual({ c, fast: await viemPayer(domain, terms, c) });
      answers.add(fast === "refused" ? "refused" : fast === account.address ? "signer" : "other");
    }
    // The cases reach all three outcomes: refused, the signer (high-s), some other key.
    expect([...answers].sort()).toEqual(["other", "refused", "signer"]);
    expect(hexToBytes(sig).length).toBe(65);
  });
});

describe("the other messages (eip712.ts: viem's hash, the same curve code; Request: request-signer.test.ts)", () => {
  test("Login recovers what viem recovers; a signature over another message gives the same other key to both; malformed ones are refused by both", async () => {
    for (let i = 0; i < 40; i++) {
      const domain = domains[i % 2]!;
      const account = privateKeyToAccount(generatePrivateKey());
      const token: Hex = bytesToHex(crypto.getRandomValues(new Uint8Array(32)));
      const n = BigInt(i + 1);
      const cases = [
        { primaryType: "Login", types: storageTypes, message: { did: account.address, token, timestamp: n }, other: { did: account.address, token, timestamp: n + 1n }, ours: recoverLogin },
      ] as const;
      for (const c of cases) {
        // viem's typed signatures are called loosely here (the casts), as the table may hold other shapes.
        const typed = { domain, types: c.types, primaryType: c.primaryType };
        const sig = await account.signTypedData({ ...typed, message: c.message } as unknown as Parameters<typeof account.signTypedData>[0]);
        const ours = c.ours as (d: typeof domain, m: unknown, s: Hex) => Promise<string>;
        expect(await ours(domain, c.message, sig)).toBe(account.address);
        const theirs = (m: unknown, s: Hex) => orRefused(() => recoverTypedDataAddress({ ...typed, message: m, signature: s } as unknown as Parameters<typeof recoverTypedDataAddress>[0]));
        const other = await ours(domain, c.other, sig);
        expect(other).not.toBe(account.address);
        expect(other).toBe(await theirs(c.other, sig));
        for (const bad of [withV(sig, 2), withV(sig, 29), `0x${sig.slice(2, 130)}` as Hex]) {
          expect(await orRefused(() => ours(domain, c.message, bad))).toBe("refused");
          expect(await theirs(c.message, bad)).toBe("refused");
        }
      }
    }
  });
});
