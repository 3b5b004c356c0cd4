/**
 * The did:ethr resolver on anvil with our DID registry: who may sign (the owner, a delegate; the
 * identity's own address only while it owns itself), and its cache — an answer is never older than
 * its cache time, a key in steady use never waits for the chain (a hit past half the time answers
 * at once and renews behind), and a failed lookup is no answer.
 */
import { describe, expect, test } from "bun:test";
import { type Address, type Chain, type PublicClient, type Transport } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { didRegistryAbi } from "../../src/chain/artifacts/index.ts";
import { canonicalDid, type Did } from "../../src/identity/did.ts";
import { DELEGATE_TYPES } from "../../src/identity/delegates.ts";
import { ethrResolver, RegistryUnavailable, RESOLVER_CACHE_MS } from "../../src/identity/resolver.ts";
import { mined } from "../support/anvil.ts";
import { testChain } from "../support/chain.ts";

const chain = await testChain();
const registry = chain.context.contracts.didRegistry;
const { publicClient } = chain.context;
const didOf = (address: Address): Did => ({ address, canonical: canonicalDid(address, chain.context.chain.id) });
const fresh = () => privateKeyToAccount(generatePrivateKey()).address;

/** The chain's client with its registry reads counted and held until `pending` is awaited; `down` fails them. */
function countingClient() {
  const state = { reads: 0, down: false, pending: [] as Promise<unknown>[] };
  const client = new Proxy(publicClient, {
    get(target, prop, receiver) {
      if (prop !== "readContract") return Reflect.get(target, prop, receiver);
      return (args: Parameters<typeof publicClient.readContract>[0]) => {
        state.reads++;
        const read = state.down ? Promise.reject(new Error("connect ECONNREFUSED")) : target.readContract(args);
        state.pending.push(read.catch(() => {}));
        return read;
      };
    },
  }) as PublicClient<Transport, Chain>;
  /** Every read begun so far has ended, those they began included, and what their answers set off
   * (the resolver's bookkeeping: microtasks, all run before the next turn of the event loop). */
  async function settled() {
    for (let seen = -1; seen !== state.pending.length; ) {
      seen = state.pending.length;
      await Promise.all(state.pending);
      await new Promise((turn) => setImmediate(turn));
    }
  }
  return { client, state, settled };
}

async function changeOwner(identity: Awaited<ReturnType<typeof chain.anvil.newAccount>>, next: Address) {
  await mined(publicClient, chain.anvil.wallet(identity).writeContract({ address: registry, abi: didRegistryAbi, functionName: "changeOwner", args: [identity.address, next] }));
}

describe("who may sign", () => {
  test("the identity itself until it names another owner; then the new owner, and the old address is a stranger", async () => {
    const resolver = ethrResolver({ publicClient, registry, cacheMs: 0 });
    const k = await chain.anvil.newAccount();
    const n = fresh();
    expect(await resolver.canSign(didOf(k.address), k.address)).toBe(true);
    expect(await resolver.canSign(didOf(k.address), n)).toBe(false);
    await changeOwner(k, n);
    expect(await resolver.canSign(didOf(k.address), k.address)).toBe(false);
    expect(await resolver.canSign(didOf(k.address), n)).toBe(true);
  });

  test("a valid delegate of either type, not one revoked", async () => {
    const resolver = ethrResolver({ publicClient, registry, cacheMs: 0 });
    const owner = await chain.anvil.newAccount();
    const [sig, veri] = [fresh(), fresh()];
    const add = (type: keyof typeof DELEGATE_TYPES, key: Address) =>
      mined(publicClient, chain.anvil.wallet(owner).writeContract({ address: registry, abi: didRegistryAbi, functionName: "addDelegate", args: [owner.address, DELEGATE_TYPES[type], key, 3600n] }));
    await add("sigAuth", sig);
    await add("veriKey", veri);
    expect(await resolver.canSign(didOf(owner.address), sig)).toBe(true);
    expect(await resolver.canSign(didOf(owner.address), veri)).toBe(true);
    await mined(publicClient, chain.anvil.wallet(owner).writeContract({ address: registry, abi: didRegistryAbi, functionName: "revokeDelegate", args: [owner.address, DELEGATE_TYPES.sigAuth, sig] }));
    expect(await resolver.canSign(didOf(owner.address), sig)).toBe(false);
  });
});

describe("the cache", () => {
  test("keeps an answer at most 10 s, the gateway's default", () => {
    expect(RESOLVER_CACHE_MS).toBeLessThanOrEqual(10_000);
  });

  test("a hit reads nothing; past half its time it answers at once and renews behind; past its time it asks", async () => {
    let clock = 1_000_000;
    const { client, state, settled } = countingClient();
    const resolver = ethrResolver({ publicClient: client, registry, cacheMs: 10_000, now: () => clock });
    const k = await chain.anvil.newAccount();
    const did = didOf(k.address);

    expect(await resolver.canSign(did, k.address)).toBe(true);
    const first = state.reads;
    expect(first).toBe(1); // the owner's read answers for the owner
    clock += 4_999;
    expect(await resolver.canSign(did, k.address)).toBe(true);
    expect(state.reads).toBe(first);

    await changeOwner(k, fresh());
    // Past half the time: the old answer, at once, while a lookup runs behind (one, however many ask).
    clock += 1;
    const [a, b] = await Promise.all([resolver.canSign(did, k.address), resolver.canSign(did, k.address)]);
    expect([a, b]).toEqual([true, true]);
    await settled();
    expect(state.reads).toBe(first + 3); // one lookup: identityOwner, then the two delegate types
    // The renewal's answer is the one kept: the change is seen well within the cache time.
    expect(await resolver.canSign(did, k.address)).toBe(false);
    expect(state.reads).toBe(first + 3);
  });

  test("a key not asked for during the cache time waits for a fresh answer", async () => {
    let clock = 1_000_000;
    const { client } = countingClient();
    const resolver = ethrResolver({ publicClient: client, registry, cacheMs: 10_000, now: () => clock });
    const k = await chain.anvil.newAccount();
    expect(await resolver.canSign(didOf(k.address), k.address)).toBe(true);
    await changeOwner(k, fresh());
    clock += 10_000;
    expect(await resolver.canSign(didOf(k.address), k.address)).toBe(false);
  });

  test("a failed lookup is no answer; a failed renewal leaves the answer to its time", async () => {
    let clock = 1_000_000;
    const { client, state, settled } = countingClient();
    const resolver = ethrResolver({ publicClient: client, registry, cacheMs: 10_000, now: () => clock });
    const k = await chain.anvil.newAccount();
    const did = didOf(k.address);

    state.down = true;
    // Not an answer, and told apart from one: the edges answer it 503 (the chain's own words kept for the log).
    const failed = await resolver.canSign(did, k.address).then(() => undefined, (err: unknown) => err);
    expect(failed).toBeInstanceOf(RegistryUnavailable);
    expect((failed as RegistryUnavailable).detail).toMatch(/ECONNREFUSED/);
    await settled();
    state.down = false;
    expect(await resolver.canSign(did, k.address)).toBe(true);

    state.down = true;
    clock += 6_000;
    expect(await resolver.canSign(did, k.address)).toBe(true); // renewing behind, and failing
    await settled();
    clock += 3_999;
    expect(await resolver.canSign(did, k.address)).toBe(true); // still within its time
    await settled();
    clock += 1;
    await expect(resolver.canSign(did, k.address)).rejects.toBeInstanceOf(RegistryUnavailable); // past its time: asked, and no answer
  });
});
