/**
 * Metering and payments (D7, D8): quota records read from the chain, reservations that enforce
 * them, and purchases by the operator key.
 *
 * @example
 *   const quota = createQuota({ db, chain, log, storedBytes: (did, except) => storedBytes(db, did, except) })
 *   app.use(quotaRoutes({ ...quota, tokens, chainId }))
 */
import type { ChainContext } from "../chain/types.ts";
import type { Db } from "../db/open.ts";
import type { Logger } from "../log.ts";
import { createMeter, type StoredBytes } from "./meter.ts";
import { createPurchases } from "./purchase.ts";
import { createRecords } from "./records.ts";

/** `storedBytes` is the storage catalog's count of an account's bytes (src/storage/files.ts). */
export function createQuota({ db, chain, log, storedBytes, maxAgeMs }: { db: Db; chain: ChainContext; log: Logger; storedBytes: StoredBytes; maxAgeMs?: number }) {
  const records = createRecords({ publicClient: chain.publicClient, proxy: chain.contracts.proxy, maxAgeMs });
  const meter = createMeter({ db, records, storedBytes });
  const purchases = createPurchases({ db, chain, records, log });
  return { records, meter, purchases };
}

export type Quota = ReturnType<typeof createQuota>;
export { quotaRoutes } from "./routes.ts";
