/**
 * Purchases (D8): the operator key calls `buySpace`/`buyTraffic(user, bytes, expectedNonce)`,
 * simulated first; the Proxy debits the user's deposit and pays the treasury. `{ tx }` is answered
 * once the receipt is mined with success. An Idempotency-Key makes a retry answer the same
 * transaction and buy once. Operator transactions go one at a time, so their nonces never race.
 */
import { and, eq } from "drizzle-orm";
import { BaseError, ContractFunctionRevertedError, type Address, type Hash } from "viem";
import { proxyAbi } from "../chain/artifacts/index.ts";
import type { ChainContext } from "../chain/types.ts";
import type { Db } from "../db/open.ts";
import { storageError, StorageError } from "../http/errors.ts";
import type { Logger } from "../log.ts";
import { weiToGwei, type Kind, type Records } from "./records.ts";
import { purchases } from "./schema.ts";

/** Default packages when no `size` is given (D8). */
export const DEFAULT_PACKAGE: Record<Kind, number> = { space: 2 ** 30, traffic: 10 * 2 ** 30 };

const FN = { space: "buySpace", traffic: "buyTraffic" } as const;
const PRICE = { space: "spacePrice", traffic: "trafficPrice" } as const;

function revertName(err: unknown): string | undefined {
  if (!(err instanceof BaseError)) return undefined;
  const reverted = err.walk((e) => e instanceof ContractFunctionRevertedError);
  return reverted instanceof ContractFunctionRevertedError ? reverted.data?.errorName : undefined;
}

/** One operator transaction at a time. */
function serial() {
  let tail: Promise<unknown> = Promise.resolve();
  return <T>(job: () => Promise<T>): Promise<T> => {
    const run = tail.then(job, job);
    tail = run.catch(() => {});
    return run;
  };
}

export function createPurchases({ db, chain, records, log, now = Date.now }: { db: Db; chain: ChainContext; records: Records; log: Logger; now?: () => number }) {
  const operatorQueue = serial();
  const { proxy } = chain.contracts;

  const gwei = (wei: bigint) => weiToGwei(wei).toString();

  async function send(user: Address, kind: Kind, bytes: bigint): Promise<Hash> {
    return operatorQueue(async () => {
      for (let attempt = 0; ; attempt++) {
        const record = await records.get(user, kind, true);
        const price = await chain.publicClient.readContract({ address: proxy, abi: proxyAbi, functionName: PRICE[kind] });
        const cost = bytes * price;
        if (record.deposit < cost) throw storageError.quota(`deposit ${gwei(record.deposit)} gwei is less than the cost ${gwei(cost)} gwei of ${bytes} bytes: deposit more first`);
        try {
          const call = { account: chain.operator.account, address: proxy, abi: proxyAbi, functionName: FN[kind], args: [user, bytes, record.nonce] } as const;
          const { request } = await chain.publicClient.simulateContract(call);
          // The estimate holds for the block it ran on; a purchase mined in the next second moves
          // `expire` and costs a little more, so leave headroom instead of running out of gas.
          const gas = await chain.publicClient.estimateContractGas(call);
          return await chain.operator.writeContract({ ...request, gas: gas + gas / 4n });
        } catch (err) {
          const name = revertName(err);
          if (name === "InsufficientDeposit") throw storageError.quota("deposit too small for this purchase");
          // Someone's grant moved the nonce between our read and the call: read again, once.
          if (name === "NonceMismatch" && attempt === 0) continue;
          throw err;
        }
      }
    });
  }

  async function confirm(hash: Hash) {
    const receipt = await chain.publicClient.waitForTransactionReceipt({ hash, timeout: 120_000 });
    if (receipt.status !== "success") throw new Error(`purchase ${hash} reverted`);
  }

  function claimKey(user: Address, kind: Kind, key: string, bytes: number) {
    return db.transaction(
      (tx) => {
        const found = tx.select().from(purchases).where(and(eq(purchases.account, user), eq(purchases.kind, kind), eq(purchases.idempotencyKey, key))).get();
        if (!found) return tx.insert(purchases).values({ account: user, kind, idempotencyKey: key, bytes, status: "pending", createdAt: now() }).returning().get();
        if (found.bytes !== bytes) throw storageError.badRequest("this Idempotency-Key was used for a different size");
        if (found.status === "pending" && !found.tx) throw storageError.conflict("a purchase with this Idempotency-Key is in progress");
        if (found.status === "failed") tx.update(purchases).set({ status: "pending" }).where(eq(purchases.id, found.id)).run();
        return found;
      },
      { behavior: "immediate" },
    );
  }

  const mark = (id: number, set: Partial<typeof purchases.$inferInsert>) => db.update(purchases).set(set).where(eq(purchases.id, id)).run();

  async function buy(user: Address, kind: Kind, bytes: number, key?: string): Promise<{ tx: Hash }> {
    const row = key ? claimKey(user, kind, key, bytes) : undefined;
    if (row?.status === "done" && row.tx) return { tx: row.tx as Hash };
    let sent: Hash | undefined = row?.tx ? (row.tx as Hash) : undefined;
    try {
      // A retry after a lost receipt finds the transaction already sent and sees how it ended.
      sent ??= await send(user, kind, BigInt(bytes));
      if (row) mark(row.id, { tx: sent });
      await confirm(sent);
      if (row) mark(row.id, { status: "done" });
      records.forget(user);
      return { tx: sent };
    } catch (err) {
      const reverted = err instanceof Error && err.message.includes("reverted");
      // Sent but not known to be mined: keep the hash, so a retry asks the chain instead of buying twice.
      if (row) mark(row.id, sent && !reverted ? { status: "pending" } : { status: "failed", tx: null });
      records.forget(user);
      if (err instanceof StorageError) throw err;
      log.error("purchase failed", { kind, bytes, err: (err as Error).message.split("\n")[0] });
      throw storageError.internal();
    }
  }

  return { buy };
}

export type Purchases = ReturnType<typeof createPurchases>;
