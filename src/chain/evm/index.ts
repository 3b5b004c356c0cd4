/**
 * An EVM chain inside the server's own process, with no network port: the embedded chain on hosts
 * where anvil cannot be shut in a private network namespace (D14). It speaks EIP-1193 `request`,
 * so viem's `custom()` transport and the JSON-RPC socket (../ipc-server.ts) sit on it directly.
 *
 * @example
 *   const chain = await createInProcessChain({ dir: "data/chain/evm", chainId: 985, log })
 *   // retryCount 0: viem retries errors it does not know (a revert's code 3) from custom transports
 *   const client = createPublicClient({ transport: custom(chain, { retryCount: 0 }) })
 */
import { chmodSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { acquireLock } from "../../datadir/lock.ts";
import type { Logger } from "../../log.ts";
import { Chain } from "./chain.ts";
import { methodNotFound } from "./errors.ts";
import { dispatch } from "./methods.ts";

export interface InProcessChain {
  request(args: { method: string; params?: unknown[] }): Promise<unknown>;
  stop(): Promise<void>;
}

export const JOURNAL_FILE = "chain.journal";

export async function createInProcessChain({ dir, chainId, log }: { dir: string; chainId: number; log: Logger }): Promise<InProcessChain> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  // Two writers on one journal would interleave records; the kernel lock goes with a killed holder.
  const lock = acquireLock(dir);
  let chain: Chain;
  try {
    chain = await Chain.open(join(dir, JOURNAL_FILE), chainId, log);
  } catch (err) {
    lock.release();
    throw err;
  }
  log.info("in-process chain ready", { chainId, block: Number(chain.height) });
  return {
    request({ method, params }) {
      if (typeof method !== "string") return Promise.reject(methodNotFound(String(method)));
      return dispatch(chain, method, Array.isArray(params) ? params : []);
    },
    async stop() {
      await chain.stop();
      lock.release();
    },
  };
}
