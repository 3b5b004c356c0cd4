/** Placeholder while the in-process EVM is being written: refuses clearly. */
import type { Logger } from "../log.ts";

type Request = (args: { method: string; params?: unknown[] }) => Promise<unknown>;

export async function createInProcessChain(_opts: { dir: string; chainId: number; log: Logger }): Promise<{ request: Request; stop(): Promise<void> }> {
  throw new Error("the in-process EVM is not available in this build");
}

export async function serveJsonRpcSocket(_path: string, _request: Request): Promise<{ close(): Promise<void> }> {
  throw new Error("the in-process EVM is not available in this build");
}
