/**
 * Purchases (D8): the operator key calls `buySpace`/`buyTraffic(user, bytes, expectedNonce)`,
 * simulated first; the Proxy debits the user's deposit and pays the treasury. `{ tx }` is answered
 * once the receipt is mined with success. An Idempotency-Key makes a retry answer the same
 * transaction and buy once, however many gateways the retries reach. Operator transactions take
 * their nonces from the database (src/chain/operator-nonces.ts, D16): purchases on one gateway or
 * many go out in parallel, and never share a nonce; a nonce whose purchase was never sent, when it
 * cannot be given back, is spent on a 0-value transfer to the operator, so the chain holds no later
 * purchase behind it. Purchases of one record (user and kind) run
 * one after the other across the cluster, from simulation to receipt, under a lease row of that
 * record: each expects the record's nonce it reads, so two in flight at once would revert one.
 */
import { BaseError, ContractFunctionRevertedError, type Address, type Hash } from "viem";
import { proxyAbi } from "../chain/artifacts/index.ts";
import type { ChainContext } from "../chain/types.ts";
import { operatorNonces } from "../chain/operator-nonces.ts";
import { acquire, release } from "../db/leases.ts";
import type { Sql } from "../db/sql.ts";
import { storageError, StorageError } from "../http/errors.ts";
import type { Logger } from "../log.ts";
import { weiToGwei, type Kind, type Records } from "./records.ts";
import type { purchases } from "./schema.ts";

type Purchase = Pick<typeof purchases.$inferSelect, "id" | "bytes" | "status" | "tx">;

const COLUMNS = "id, bytes, status, tx";
const CLAIM = `INSERT INTO purchases (account, kind, idempotency_key, bytes, status, created_at) VALUES ($1, $2, $3, $4, 'pending', $5)
  ON CONFLICT (account, kind, idempotency_key) DO NOTHING RETURNING ${COLUMNS}`;
const CLAIMED = `SELECT ${COLUMNS} FROM purchases WHERE account = $1 AND kind = $2 AND idempotency_key = $3 FOR UPDATE`;
const PENDING = "UPDATE purchases SET status = 'pending' WHERE id = $1";
const SENT = "UPDATE purchases SET tx = $2 WHERE id = $1";
const DONE = "UPDATE purchases SET status = 'done' WHERE id = $1";
const FAILED = "UPDATE purchases SET status = 'failed', tx = NULL WHERE id = $1";

/** Default packages when no `size` is given (D8). */
export const DEFAULT_PACKAGE: Record<Kind, number> = { space: 2 ** 30, traffic: 10 * 2 ** 30 };

const FN = { space: "buySpace", traffic: "buyTraffic" } as const;
const RECEIPT_TIMEOUT_MS = 120_000;
/** A record's lease outlives the longest purchase (a receipt's wait), so only a dead holder's lapses. */
const RECORD_LEASE_MS = RECEIPT_TIMEOUT_MS + 30_000;
/** How long a purchase waits for another of the same record before answering 409. */
const RECORD_WAIT_MS = 60_000;
const RECORD_POLL_MS = 50;
const PRICE = { space: "spacePrice", traffic: "trafficPrice" } as const;

function revertName(err: unknown): string | undefined {
  if (!(err instanceof BaseError)) return undefined;
  const reverted = err.walk((e) => e instanceof ContractFunctionRevertedError);
  return reverted instanceof ContractFunctionRevertedError ? reverted.data?.errorName : undefined;
}

/**
 * Jobs of one key one at a time, different keys in parallel. A purchase reads its record's
 * expected nonce just before it sends: two purchases of one record sent at once would both
 * expect the same one, and the second would revert.
 */
function perKey() {
  const tails = new Map<string, Promise<unknown>>();
  return <T>(key: string, job: () => Promise<T>): Promise<T> => {
    const run = (tails.get(key) ?? Promise.resolve()).then(job, job);
    const tail = run.catch(() => {});
    tails.set(key, tail);
    void tail.then(() => {
      if (tails.get(key) === tail) tails.delete(key);
    });
    return run;
  };
}

/** The operator's nonces (D16), with gaps filled by a 0-value transfer to itself. */
export function purchaseNonces({ sql, chain, log }: { sql: Sql; chain: ChainContext; log: Logger }) {
  const operator = chain.operator.account.address;
  return operatorNonces({
    sql,
    chainId: chain.chain.id,
    address: operator,
    pending: () => chain.publicClient.getTransactionCount({ address: operator, blockTag: "pending" }),
    fill: async (nonce) => {
      log.warn("an operator nonce was taken and its transaction never sent; filling it with a 0-value transfer to the operator", { nonce });
      try {
        await chain.operator.sendTransaction({ to: operator, value: 0n, nonce });
      } catch (err) {
        log.error("filling an operator nonce failed: the gap stays, and later operator transactions wait behind it until their receipts time out", {
          nonce,
          err: (err as Error).message.split("\n")[0],
        });
      }
    },
  });
}

/** `onOutcome` hears how each purchase ended (the server's metrics). */
export function createPurchases({ sql, chain, records, log, now = Date.now, onOutcome }: { sql: Sql; chain: ChainContext; records: Records; log: Logger; now?: () => number; onOutcome?: (kind: Kind, outcome: "done" | "failed") => void }) {
  const { proxy } = chain.contracts;
  const nonces = purchaseNonces({ sql, chain, log });

  const gwei = (wei: bigint) => weiToGwei(wei).toString();
  const oneRecordAtATime = perKey();

  async function send(user: Address, kind: Kind, bytes: bigint): Promise<Hash> {
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
        return await nonces.send((nonce) => chain.operator.writeContract({ ...request, gas: gas + gas / 4n, nonce }));
      } catch (err) {
        const name = revertName(err);
        if (name === "InsufficientDeposit") throw storageError.quota("deposit too small for this purchase");
        // Someone's grant moved the nonce between our read and the call: read again, once.
        if (name === "NonceMismatch" && attempt === 0) continue;
        throw err;
      }
    }
  }

  async function confirm(hash: Hash) {
    const receipt = await chain.publicClient.waitForTransactionReceipt({ hash, timeout: RECEIPT_TIMEOUT_MS });
    if (receipt.status !== "success") throw new Error(`purchase ${hash} reverted`);
  }

  /** The purchase row of an Idempotency-Key: made by the first request, locked while one decides (D16). */
  function claimKey(user: Address, kind: Kind, key: string, bytes: number): Promise<Purchase> {
    return sql.tx(
      async (tx) => {
        const made = await tx.get<Purchase>(CLAIM, [user, kind, key, bytes, now()]);
        if (made) return made;
        const found = await tx.get<Purchase>(CLAIMED, [user, kind, key]);
        if (!found) throw new Error("purchases: the row that conflicted is gone");
        if (found.bytes !== bytes) throw storageError.badRequest("this Idempotency-Key was used for a different size");
        if (found.status === "pending" && !found.tx) throw storageError.conflict("a purchase with this Idempotency-Key is in progress");
        if (found.status === "failed") await tx.run(PENDING, [found.id]);
        return found;
      },
      { isolation: "read committed" },
    );
  }

  /** `job` while this purchase holds its record's lease, waited for across the cluster (D16). */
  async function oneRecordInCluster<T>(record: string, job: () => Promise<T>): Promise<T> {
    const name = `purchase:${record}`;
    const holder = crypto.randomUUID();
    const deadline = now() + RECORD_WAIT_MS;
    let lease = await acquire(sql, name, holder, { ttlMs: RECORD_LEASE_MS, now: now() });
    while (!lease) {
      if (now() > deadline) throw storageError.conflict("another purchase of this record is still in progress; try again");
      await Bun.sleep(RECORD_POLL_MS);
      lease = await acquire(sql, name, holder, { ttlMs: RECORD_LEASE_MS, now: now() });
    }
    try {
      return await job();
    } finally {
      await release(sql, lease).catch((err) => log.warn("releasing a purchase's record lease failed", { err: (err as Error).message }));
    }
  }

  async function buy(user: Address, kind: Kind, bytes: number, key?: string): Promise<{ tx: Hash }> {
    const row = key ? await claimKey(user, kind, key, bytes) : undefined;
    if (row?.status === "done" && row.tx) return { tx: row.tx as Hash };
    let sent: Hash | undefined = row?.tx ? (row.tx as Hash) : undefined;
    try {
      const record = `${user}:${kind}`;
      const hash = await oneRecordAtATime(record, () =>
        oneRecordInCluster(record, async () => {
          // A retry after a lost receipt finds the transaction already sent and sees how it ended.
          sent ??= await send(user, kind, BigInt(bytes));
          if (row) await sql.run(SENT, [row.id, sent]);
          await confirm(sent);
          return sent;
        }),
      );
      if (row) await sql.run(DONE, [row.id]);
      records.forget(user);
      onOutcome?.(kind, "done");
      return { tx: hash };
    } catch (err) {
      const reverted = err instanceof Error && err.message.includes("reverted");
      // Sent but not known to be mined: keep the hash, so a retry asks the chain instead of buying twice.
      if (row) await sql.run(sent && !reverted ? PENDING : FAILED, [row.id]).catch((e) => log.error("recording a purchase's outcome failed", { err: (e as Error).message }));
      records.forget(user);
      onOutcome?.(kind, "failed");
      if (err instanceof StorageError) throw err;
      log.error("purchase failed", { kind, bytes, err: (err as Error).message.split("\n")[0] });
      throw storageError.internal();
    }
  }

  return { buy };
}

export type Purchases = ReturnType<typeof createPurchases>;
