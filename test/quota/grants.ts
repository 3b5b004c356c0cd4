/**
 * Free quota for the quota tests' accounts: the Proxy's owner grants it (grantFree), and the call
 * returns once it is mined, so the next request reads the new record. One helper instead of a copy
 * in each quota test file.
 */
import type { Address } from "viem";
import { proxyAbi } from "../../src/chain/artifacts/index.ts";
import { mined } from "../support/anvil.ts";
import type { TestChain } from "../support/chain.ts";

const KIND = { space: 0, traffic: 1 } as const;

/** `grant(user, kind, bytes, validitySeconds = 0)` on this test chain. */
export function granter(chain: Pick<TestChain, "anvil" | "context" | "admin">) {
  return async (user: Address, kind: keyof typeof KIND, bytes: number | bigint, validitySeconds = 0) => {
    await mined(
      chain.anvil.publicClient,
      chain.anvil.wallet(chain.admin).writeContract({ address: chain.context.contracts.proxy, abi: proxyAbi, functionName: "grantFree", args: [user, KIND[kind], BigInt(bytes), BigInt(validitySeconds)] }),
    );
  };
}
