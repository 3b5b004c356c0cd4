/**
 * A DID's published age recipient (D20): the did:ethr key-agreement attribute
 * `did/pub/X25519/enc/base64` on the ERC-1056 registry, read by the SDK (to share with a reader)
 * and by the gateway (to write a buyer's share). The registry keeps no attribute state, only
 * events chained by block (`changed` → `previousChange`), so the log is walked from the newest
 * change back; the newest valid, unrevoked value wins.
 */
import { getAddress, hexToBytes, isAddressEqual, stringToHex, type Address, type Chain, type Hex, type PublicClient, type Transport } from "viem";
import { didRegistryAbi } from "../chain/artifacts/index.ts";
import { recipientFromBytes } from "./age.ts";

export const KEY_AGREEMENT_ATTRIBUTE = "did/pub/X25519/enc/base64";
/** The attribute's name as the registry stores it (bytes32, right-padded). */
export const KEY_AGREEMENT_NAME = stringToHex(KEY_AGREEMENT_ATTRIBUTE, { size: 32 });

export async function publishedRecipient(publicClient: PublicClient<Transport, Chain | undefined>, registry: Address, identity: Address, nowSeconds = BigInt(Math.floor(Date.now() / 1000))): Promise<string | undefined> {
  const who = getAddress(identity);
  const revoked = new Set<string>();
  let block = await publicClient.readContract({ address: registry, abi: didRegistryAbi, functionName: "changed", args: [who] });
  while (block > 0n) {
    const logs = await publicClient.getContractEvents({ address: registry, abi: didRegistryAbi, fromBlock: block, toBlock: block });
    const mine = logs.filter((l) => {
      const id = (l.args as { identity?: Address }).identity;
      return id !== undefined && isAddressEqual(id, who);
    });
    if (!mine.length) break;
    for (const log of [...mine].reverse()) {
      if (log.eventName !== "DIDAttributeChanged") continue;
      const { name, value, validTo } = log.args as { name: Hex; value: Hex; validTo: bigint };
      if (name !== KEY_AGREEMENT_NAME) continue;
      if (validTo > nowSeconds && !revoked.has(value)) {
        try {
          return recipientFromBytes(hexToBytes(value));
        } catch {
          // not an X25519 key: look further back
        }
      }
      revoked.add(value);
    }
    // The block's first event of this identity links to its previous change.
    block = (mine[0]?.args as { previousChange: bigint }).previousChange;
  }
  return undefined;
}
