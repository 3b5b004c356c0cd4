/**
 * Metering and payments (D7, D8): quota records read from the chain, reservations that enforce
 * them, and purchases by the operator key.
 *
 * @example
 *   const quota = createQuota({ sql, chain, log, storedBytes: storedBytesSql })
 *   app.use(quotaRoutes({ ...quota, tokens, chainId }))
 */
import type { ChainContext } from "../chain/types.ts";
import type { Sql } from "../db/sql.ts";
import type { Logger } from "../log.ts";
import { createMeter, type StoredBytes } from "./meter.ts";
import { createPurchases } from "./purchase.ts";
import { createRecords } from "./records.ts";

/** `storedBytes` is the storage catalog's count of an account's bytes, as SQL the meter embeds
 * (src/storage/files.ts `storedBytesSql`); `gateway` the id this gateway's holds carry (its data
 * dir's, src/datadir/gateway-id.ts), so that it clears its dead process's holds when it starts again. */
export function createQuota({ sql, chain, log, storedBytes, gateway, maxAgeMs, onPurchase }: { sql: Sql; chain: ChainContext; log: Logger; storedBytes: StoredBytes; gateway?: string; maxAgeMs?: number; onPurchase?: Parameters<typeof createPurchases>[0]["onOutcome"] }) {
  const records = createRecords({ publicClient: chain.publicClient, proxy: chain.contracts.proxy, maxAgeMs });
  const meter = createMeter({ sql, records, storedBytes, gateway });
  const purchases = createPurchases({ sql, chain, records, log, onOutcome: onPurchase });
  return { records, meter, purchases };
}

export type Quota = ReturnType<typeof createQuota>;
export { quotaRoutes } from "./routes.ts";
