/**
 * The hand-built Request hash (src/identity/request-signer.ts) must answer exactly as viem's
 * recoverTypedDataAddress, which restricted calls used before: the same signer for every message
 * (random keys, DIDs and payloads with non-ASCII text, tokens of every allowed length, requestIDs
 * up to 2^64 − 1, every action), some other key for a changed field, and a refusal exactly where
 * viem throws (bad v, wrong length, a requestID beyond uint64).
 */
import { describe, expect, test } from "bun:test";
import { recoverTypedDataAddress, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { storageTypes, type RequestAction, type RequestMessage } from "../../src/identity/eip712.ts";
import { requestSigner } from "../../src/identity/request-signer.ts";
import { domains, orRefused, withV } from "./support.ts";

const actions: RequestAction[] = ["upload", "delete", "keys", "age"];
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)] as T;
const hex = (bytes: number): Hex => `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("hex")}`;
const text = () => pick(["", "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4", "did:ethr:0x7a69:0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "ünïcødé ✓ 𝄞", hex(32).slice(2), String(Math.random())]);
const randomMessage = (): RequestMessage => ({
  did: text(),
  token: hex(pick([16, 32, 64])),
  requestID: pick([0n, 1n, 64n, (1n << 53n) - 1n, (1n << 64n) - 1n, BigInt(Math.floor(Math.random() * Number.MAX_SAFE_INTEGER))]),
  action: pick(actions),
  payload: text(),
});

const viemSigner = (domain: (typeof domains)[number], message: RequestMessage, signature: Hex) =>
  orRefused(() => recoverTypedDataAddress({ domain, types: storageTypes, primaryType: "Request", message, signature }));
const fastSigner = (recover: ReturnType<typeof requestSigner>, message: RequestMessage, signature: Hex) => orRefused(() => recover(message, signature));

describe("requestSigner", () => {
  test("recovers what viem recovers for random keys and messages, both v forms, on two domains", async () => {
    let same = 0;
    for (let i = 0; i < 120; i++) {
      const domain = domains[i % 2] as (typeof domains)[number];
      const recover = requestSigner(domain);
      const account = privateKeyToAccount(generatePrivateKey());
      const message = randomMessage();
      const sig = await account.signTypedData({ domain, types: storageTypes, primaryType: "Request", message });
      const v = Number.parseInt(sig.slice(130), 16);
      for (const form of [sig, withV(sig, v - 27)]) {
        const fast = await fastSigner(recover, message, form);
        expect(fast).toBe(account.address);
        expect(fast).toBe(await viemSigner(domain, message, form));
        same++;
      }
      // Any changed field: some other key, the same one for both.
      for (const changed of [{ ...message, requestID: message.requestID ^ 1n }, { ...message, payload: `${message.payload}x` }, { ...message, did: `${message.did}x` }, { ...message, token: hex(32) }, { ...message, action: message.action === "upload" ? "delete" : "upload" } as RequestMessage]) {
        const other = await fastSigner(recover, changed, sig);
        expect(other).not.toBe(account.address);
        expect(other).toBe(await viemSigner(domain, changed, sig));
      }
    }
    expect(same).toBe(240);
  });

  test("refuses where viem refuses: bad v, wrong length, a requestID beyond uint64", async () => {
    const domain = domains[0] as (typeof domains)[number];
    const recover = requestSigner(domain);
    const account = privateKeyToAccount(generatePrivateKey());
    const message = randomMessage();
    const sig = await account.signTypedData({ domain, types: storageTypes, primaryType: "Request", message });
    for (const bad of [withV(sig, 2), withV(sig, 29), sig.slice(0, 128) as Hex, `${sig}00` as Hex]) {
      expect(await fastSigner(recover, message, bad)).toBe("refused");
      expect(await viemSigner(domain, message, bad)).toBe("refused");
    }
    const huge = { ...message, requestID: 1n << 64n };
    expect(await fastSigner(recover, huge, sig)).toBe("refused");
    expect(await viemSigner(domain, huge, sig)).toBe("refused");
  });
});
