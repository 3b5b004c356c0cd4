/**
 * Whether a blob's bytes are what its key names. Both kinds of blob are content-addressed: a dfs
 * chunk's key is the raw-leaf Cid of its SHA-256, an ipfs block's the multihash of its bytes. So a
 * blob is checked against its own key, with no list of hashes kept anywhere else (backup, restore
 * and the consistency check all use this).
 */
import { hashOfKey } from "../storage/dfs/cid.ts";
import { cidOfKey, verifyBlock } from "../storage/ipfs/blocks.ts";
import { sha256Hex } from "./files.ts";

/** Why `bytes` are not the blob `key` names, or undefined when they are. */
export function contentProblem(key: string, bytes: Uint8Array): string | undefined {
  const hash = hashOfKey(key);
  if (hash !== undefined) return sha256Hex(bytes) === hash ? undefined : "SHA-256 differs from its key";
  const cid = cidOfKey(key);
  if (cid === undefined) return "not a dfs chunk or ipfs block key";
  try {
    verifyBlock(cid, bytes);
    return undefined;
  } catch (err) {
    return (err as Error).message.includes("unsupported hash") ? (err as Error).message : "SHA-256 differs from its key";
  }
}
