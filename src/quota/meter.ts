/**
 * Quota enforcement (D7, D14). One space pool and one traffic pool per account, shared by `dfs` and
 * `ipfs`. A transfer holds only what it is sure to need: a download its length, an upload the bytes
 * that have arrived (multipart framing and bytes not yet sent never hold anything, so they cannot
 * refuse another transfer). An upload checks again when its bytes pass what was free (or its
 * declared length) at its last check; the exact check — stored + others' holds + this file ≤ pool
 * — runs in the transaction that inserts the file row. Each check that holds bytes is one
 * transaction that first locks the account's `quota_accounts` row (D16), so no number of parallel
 * requests, on one gateway or many, can exceed a pool: the checks of one account run one after
 * the other, each reading what the last one wrote (READ COMMITTED, a fresh snapshot per
 * statement). An upload's first look, before any byte, holds nothing and only reads.
 *
 * Holds carry this gateway's id (its data dir's, src/datadir/gateway-id.ts) and an `expires_at`
 * renewed while bytes flow: a hold of a dead gateway or a silent client stops counting once
 * expired, and expired holds are cleared. A gateway that starts again clears its own holds at
 * once: they are those of its previous process, which died (the data dir's lock lets one process
 * at a time hold its id), and whose transfers died with it. A live gateway's holds carry another
 * id and are never touched. A lasting hold (a multipart upload's parts) outlives any process: it
 * carries no gateway's id, and ends with its upload or its own expiry.
 *
 * What an account stores is the storage catalog's to say: the meter is handed `storedBytes`, and
 * calls it with its own transaction, so it sees the file row the deciding transaction has just
 * written.
 *
 * @example
 *   const meter = createMeter({ sql, records, storedBytes })
 *   const up = await meter.beginUpload(address, did, { declared, backend: "dfs", name })
 *   // or, with other first looks in one statement: [, up] = await looks(sql, other, await meter.uploadLook(…))
 *   await up.add(chunk.byteLength)              // throws 402 once it cannot fit
 *   await files.add(row, [up.commit(size, moved)])   // or await up.release()
 */
import type { Address } from "viem";
import { type Fragment, type Look, looks, type Param, placeholders, type Queryable, shifted, type Sql, together, type TxOptions } from "../db/sql.ts";
import { failure } from "../failure.ts";
import { allowance, weiToGwei, type Kind, type Records } from "./records.ts";

/** A hold nobody renews stops counting after this long (a gateway killed, a client gone silent). */
export const RESERVATION_TTL_MS = 60_000;
/** A transfer whose bytes flow renews its holds this often, well inside the TTL. */
const RENEW_MS = 10_000;
/** An upload records the bytes it received at least every this many, so others' checks see them. */
const RECORD_STEP = 8 * 1024 * 1024;

/** JSON numbers are exact to 2^53 (D7: int64-safe); larger uint64 values are clamped. */
const safe = (n: bigint) => Number(n > BigInt(Number.MAX_SAFE_INTEGER) ? BigInt(Number.MAX_SAFE_INTEGER) : n);

/**
 * Bytes `did` stores, leaving out the file named `except` (the one an upload would replace: it stops
 * counting when replaced), as an SQL expression: the meter reads it in the same statement as the
 * pools' other numbers (`used`), in its own transaction when it is in one.
 */
export type StoredBytes = (did: string, except?: { backend: string; name: string }) => Fragment;

/** Every quota transaction: its reads follow the account's row lock, its writes are relative (D16). */
const LOCKED: TxOptions = { isolation: "read committed" };
/** An upload's holds while it streams: a power cut ends the upload and its holds' meaning with
 * it (the file row and its exact check commit durably), so they skip SQLite's fsync (sql.ts). */
const HOLDING: TxOptions = { ...LOCKED, durable: false };

const LIVE = "SELECT kind AS pool, COUNT(*) AS count, CAST(COALESCE(SUM(bytes), 0) AS BIGINT) AS bytes FROM quota_reservations WHERE expires_at > $1 GROUP BY kind";
const LOCK = "SELECT account FROM quota_accounts WHERE account = $1 FOR UPDATE";
const ADD_ACCOUNT = "INSERT INTO quota_accounts (account) VALUES ($1) ON CONFLICT (account) DO NOTHING";
const RENEW = "UPDATE quota_reservations SET bytes = $2, expires_at = $3 WHERE id = $1 RETURNING id";
const HOLD = "INSERT INTO quota_reservations (account, kind, bytes, created_at, gateway, expires_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id";
const ADD_TRAFFIC = "INSERT INTO traffic_usage (account, period_start, bytes) VALUES ($1, $2, $3) ON CONFLICT (account, period_start) DO UPDATE SET bytes = traffic_usage.bytes + excluded.bytes";
/** Whether the account's row exists ($1: the account), as a column of an upload's first look. */
const ACCOUNT_MADE = "EXISTS (SELECT 1 FROM quota_accounts WHERE account = $1)";
const CLEAR_STALE = "DELETE FROM quota_reservations WHERE expires_at <= $1";
const CLEAR_OWN = "DELETE FROM quota_reservations WHERE gateway = $1";

/** The `gateway` of a lasting hold: no process's (gateway ids are `host/uuid`, never this). */
export const LASTING = "lasting";

/**
 * D16: the first statements of every quota transaction. The account's row is made on its first
 * transfer (a conflict-free insert), then locked; another gateway's check of the same account
 * waits here until this transaction ends.
 */
async function lockAccount(tx: Queryable, account: string) {
  if (await tx.get(LOCK, [account])) return;
  await tx.run(ADD_ACCOUNT, [account]);
  await tx.get(LOCK, [account]);
}

/** The lock alone, in a transaction that made the account's row before it (an upload's `prepare`):
 * it needs no answer before the statements that follow it (storage/files.ts Participant). */
async function lockMade(tx: Queryable, account: string) {
  if (!(await tx.get(LOCK, [account]))) throw new Error(`the quota account ${account} has no row to lock`);
}

/** What of an account's pools is in use, as `used` reads it. */
interface Usage {
  /** Stored (when a DID was given) plus live space holds. */
  space: number;
  /** Moved this period (when a period was given) plus live traffic holds. */
  traffic: number;
}

const drop = async (q: Queryable, ids: (number | undefined)[]) => {
  const some = ids.filter((id): id is number => id !== undefined);
  if (some.length) await q.run(`DELETE FROM quota_reservations WHERE id IN (${placeholders(some.length)})`, some);
};

/** `gateway`: this gateway's id, which its holds carry (default: one of its own, for a meter that
 * no data dir names; such a meter's holds are cleared only once they expire). */
export function createMeter({ sql, records, storedBytes, now = Date.now, gateway = `meter/${crypto.randomUUID()}` }: { sql: Sql; records: Records; storedBytes: StoredBytes; now?: () => number; gateway?: string }) {
  if (gateway === LASTING) throw new Error(`"${LASTING}" is no gateway id`);
  async function pool(account: Address, kind: Kind) {
    const [record, time] = await Promise.all([records.get(account, kind), records.chainTime()]);
    // Expire 0: nothing was ever bought or granted, which is not "expired".
    return { record, limit: allowance(record, time), periodStart: Number(record.periodStart), expired: record.expire > 0n && record.expire <= time };
  }

  /**
   * Bytes in use in both pools, as one look (db/sql.ts): what `stored` counts (space), what moved
   * since `periodStart` (traffic), and the live holds of transfers other than the holds `mine`.
   * Read alone it is one statement (it was four, and on PostgreSQL each is a round trip taken with
   * the account's lock held, which one account's uploads wait for in turn); an upload's first look
   * rides in the statement that reads its session and its voucher.
   */
  function usage(account: Address, what: { stored?: Fragment; periodStart?: number; mine?: number[] }): Look<Usage> {
    const mine = what.mine ?? [];
    const params: Param[] = [account, now(), ...mine];
    const others = mine.length ? ` AND id NOT IN (${placeholders(mine.length, 3)})` : "";
    // Each pool's live holds: one lookup of the account's rows (index quota_reservations_account).
    const held = (kind: Kind) => `(SELECT CAST(COALESCE(SUM(bytes), 0) AS BIGINT) FROM quota_reservations WHERE account = $1 AND kind = '${kind}' AND expires_at > $2${others})`;
    const columns: Record<string, string> = { spaceHeld: held("space"), trafficHeld: held("traffic") };
    if (what.stored) {
      columns.stored = shifted(what.stored, params.length);
      params.push(...what.stored.params);
    }
    if (what.periodStart !== undefined) {
      params.push(what.periodStart);
      columns.moved = `COALESCE((SELECT bytes FROM traffic_usage WHERE account = $1 AND period_start = $${params.length}), 0)`;
    }
    return {
      columns,
      params,
      read: (row) => ({ space: Number(row.stored ?? 0) + Number(row.spaceHeld ?? 0), traffic: Number(row.moved ?? 0) + Number(row.trafficHeld ?? 0) }),
    };
  }

  /** `usage` read with `q` (in the caller's transaction, after the account's lock). */
  async function used(q: Queryable, account: Address, what: { stored?: Fragment; periodStart?: number; mine?: number[] }): Promise<Usage> {
    const [inUse] = await looks(q, usage(account, what));
    return inUse;
  }

  const refuse = (kind: Kind, limit: number, inUse: number, want: number) =>
    failure("quota-exceeded", `not enough ${kind}: ${limit} bytes allowed, ${inUse} in use, ${want} more needed — buy more (GET /dfs/buy${kind}) or ask for a grant`);

  /** Inserts or renews a hold of `bytes`; a hold that expired meanwhile (and was cleared) is made again. */
  async function hold(tx: Queryable, account: Address, kind: Kind, bytes: number, id: number | undefined): Promise<number> {
    const expiresAt = now() + RESERVATION_TTL_MS;
    if (id !== undefined) {
      const kept = await tx.get<{ id: number }>(RENEW, [id, bytes, expiresAt]);
      if (kept) return kept.id;
    }
    const made = await tx.get<{ id: number }>(HOLD, [account, kind, bytes, now(), gateway, expiresAt]);
    if (!made) throw new Error("INSERT … RETURNING gave no row");
    return made.id;
  }

  async function addTraffic(tx: Queryable, account: Address, periodStart: number, bytes: number) {
    if (bytes > 0) await tx.run(ADD_TRAFFIC, [account, periodStart, bytes]);
  }

  /**
   * An upload's meter, as the look (db/sql.ts) that starts it: its first check, which the caller
   * reads with its other first looks in one statement (`beginUpload` reads it alone). `declared` is
   * the request's Content-Length (file plus framing), if any; `backend` and `name` name the entry
   * the file would replace, whose bytes it need not find room for; without them (a multipart
   * upload's part, which replaces no file) nothing is left out. A pool of 0 is refused here,
   * before any read.
   */
  async function uploadLook(account: Address, did: string, opts: { declared?: number; backend?: string; name?: string }) {
    const [space, traffic] = await Promise.all([pool(account, "space"), pool(account, "traffic")]);
    if (space.limit === 0) throw failure("quota-exceeded", space.expired ? "your storage space has expired: buy more or ask for a grant" : "no storage space: buy some (GET /dfs/buyspace) or ask for a grant");
    const replaced = opts.backend !== undefined && opts.name !== undefined ? { backend: opts.backend, name: opts.name } : undefined;
    const declared = opts.declared !== undefined && opts.declared > 0 ? opts.declared : Number.POSITIVE_INFINITY;
    const ids: Record<Kind, number | undefined> = { space: undefined, traffic: undefined };
    let received = 0;
    /** Received bytes past which a check must run: what was free at the last one, or the declared length. */
    let checkAt = 0;
    let recorded = 0;
    let recordedAt = 0;
    let closed = false;
    /** The check running now: bytes that arrive meanwhile wait for it rather than start another. */
    let checking: Promise<void> | undefined;
    /** Whether the account's row exists (rows are never deleted): the first look read it, or a
     * check made it. The file row's transaction then sends no insert of it. */
    let made = false;

    const mine = () => Object.values(ids).filter((id) => id !== undefined);

    /** What both pools leave free once `want` more bytes count beside `inUse`, or the refusal of
     * the first that cannot take them. */
    function fits(inUse: Usage, want: number): number | ReturnType<typeof refuse> {
      let free = Number.POSITIVE_INFINITY;
      for (const [kind, p] of [["space", space], ["traffic", traffic]] as const) {
        const others = inUse[kind];
        if (others + want > p.limit) return refuse(kind, p.limit, others, want);
        free = Math.min(free, p.limit - others - want);
      }
      return free;
    }

    /** `fits`, with what is in use read with `q`. */
    const room = async (q: Queryable, want: number) => fits(await used(q, account, { stored: storedBytes(did, replaced), periodStart: traffic.periodStart, mine: mine() }), want);

    /** A check's outcome for `want` bytes received: refused (the meter closes), or when to check next. */
    function checked(outcome: number | ReturnType<typeof refuse>, want: number) {
      if (typeof outcome !== "number") {
        closed = true;
        throw outcome;
      }
      recorded = want;
      recordedAt = now();
      checkAt = want + Math.min(Math.max(declared - want, 0), outcome);
    }

    /** Checks both pools for the bytes received so far and records them as this upload's holds. */
    async function check() {
      const want = received;
      // Each attempt starts from the holds as they were: a retried transaction must not see ids
      // its rolled-back attempt made.
      const before = { ...ids };
      const outcome = await sql.tx(async (tx) => {
        Object.assign(ids, before);
        await lockAccount(tx, account);
        made = true;
        const free = await room(tx, want);
        if (typeof free !== "number") {
          // Dropped in this same transaction: a refused upload never counts against another.
          await drop(tx, Object.values(ids));
          return free;
        }
        ids.space = await hold(tx, account, "space", want, ids.space);
        ids.traffic = await hold(tx, account, "traffic", want, ids.traffic);
        return free;
      }, HOLDING);
      checked(outcome, want);
    }

    const upload = {
      /** Counts bytes that arrived: checks again past what was free, records them now and then. */
      async add(bytes: number) {
        if (closed) return;
        received += bytes;
        while (!closed && (received > checkAt || received - recorded >= RECORD_STEP || now() - recordedAt >= RENEW_MS)) {
          if (checking) {
            await checking;
            continue;
          }
          checking = check().finally(() => {
            checking = undefined;
          });
          await checking;
        }
      },
      /**
       * The exact check, for the transaction that records the file row (of `size` bytes, `moved`
       * over the wire): it locks the account first, then, once the row is in, the file counts as
       * stored, its traffic as moved, and the holds go. Throws 402 (rolling it back) when it does not fit.
       */
      commit(size: number, moved: number) {
        if (closed) throw new Error("upload meter already closed");
        return {
          // The account's row before the lock (a conflict-free insert takes no lock on a row that
          // exists), so the lock goes out with the file row's statements (files.ts Participant);
          // only on the account's first upload (an insert that does nothing is a statement all the same).
          prepare: async (tx: Queryable) => void (made || (await tx.run(ADD_ACCOUNT, [account]))),
          lock: (tx: Queryable) => lockMade(tx, account),
          settle: async (tx: Queryable) => {
            const holds = mine();
            // The file row is in: it counts in what is stored. The read runs before the writes
            // (they go together: one round trip on PostgreSQL), which a refusal rolls back.
            const [inUse] = await together(
              used(tx, account, { stored: storedBytes(did), periodStart: traffic.periodStart, mine: holds }),
              drop(tx, holds),
              addTraffic(tx, account, traffic.periodStart, moved),
            );
            const withFile = inUse.space;
            if (withFile > space.limit) throw refuse("space", space.limit, withFile - size, size);
            const movedBefore = inUse.traffic;
            if (movedBefore + moved > traffic.limit) throw refuse("traffic", traffic.limit, movedBefore, moved);
            closed = true;
          },
        };
      },
      /**
       * The holds this upload has now, for a transaction that takes them over (a multipart part's:
       * `spaceHold.set` drops them where its lasting hold grows by the part). Once that committed,
       * `handedOver()`: they are gone, and `release` has nothing left to give back.
       */
      holds: () => mine(),
      handedOver() {
        closed = true;
      },
      /** Gives the holds back (a refused or failed upload). Deleting only lowers what counts: no lock needed. */
      async release() {
        if (closed) return;
        closed = true;
        await drop(sql, Object.values(ids));
      },
    };
    // The check before any byte arrived. A hold of nothing changes no other check, so it holds
    // nothing: it reads, without a transaction or the account's lock, whether the pools are full
    // already and how far the upload may get before it must check (and hold) for real. As a look,
    // so that it rides in the statement of the caller's other first looks.
    const first = usage(account, { stored: storedBytes(did, replaced), periodStart: traffic.periodStart });
    const look: Look<typeof upload> = {
      ...first,
      columns: { ...first.columns, accountMade: ACCOUNT_MADE },
      read(row) {
        made = Boolean(row.accountMade); // 0/1 on SQLite
        checked(fits(first.read(row), 0), 0);
        return upload;
      },
    };
    return look;
  }

  /** An upload's meter, its first look read by itself (uploadLook). */
  async function beginUpload(account: Address, did: string, opts: { declared?: number; backend?: string; name?: string }) {
    const [upload] = await looks(sql, await uploadLook(account, did, opts));
    return upload;
  }

  /**
   * A download holds its whole length from the start: those bytes are going out. `withHold` runs
   * in the hold's transaction (the voucher's claim: one commit for both), which is then durable
   * before any byte goes out: a voucher is accepted once (D6), and a claim a power cut took with
   * it would let the same voucher fetch the bytes again. A hold alone (the S3 API's, no voucher)
   * commits without an fsync of its own (as an upload's, HOLDING): the settlement's durable
   * commit carries it, and a power cut before that ends the download it holds for.
   */
  async function beginDownload(account: Address, bytes: number, withHold?: (tx: Queryable) => Promise<void>) {
    const traffic = await pool(account, "traffic");
    let id = await sql.tx(async (tx) => {
      await lockAccount(tx, account);
      const inUse = (await used(tx, account, { periodStart: traffic.periodStart })).traffic;
      if (inUse + bytes > traffic.limit) throw refuse("traffic", traffic.limit, inUse, bytes);
      const made = await hold(tx, account, "traffic", bytes, undefined);
      await withHold?.(tx);
      return made;
    }, withHold ? LOCKED : HOLDING);
    let renewedAt = now();
    let closed = false;
    return {
      /** Bytes are flowing: keeps the hold alive past its TTL (a slow client of a large file). */
      async renew() {
        if (closed || now() - renewedAt < RENEW_MS) return;
        renewedAt = now();
        const kept = id;
        id = await sql.tx(async (tx) => {
          await lockAccount(tx, account);
          return hold(tx, account, "traffic", bytes, kept);
        }, HOLDING);
      },
      /** What was really sent counts; the rest of the reservation is given back. `withSettle`
       * runs in the same transaction (the voucher's counter). */
      async settle(sent: number, withSettle?: (tx: Queryable) => Promise<void>) {
        if (closed) return;
        closed = true;
        await sql.tx(async (tx) => {
          await lockAccount(tx, account);
          await drop(tx, [id]);
          await addTraffic(tx, account, traffic.periodStart, sent);
          await withSettle?.(tx);
        }, LOCKED);
      },
    };
  }

  /**
   * A download read whole before any byte of it goes out (a range of up to a chunk): no hold.
   * `charge` checks the traffic pool and counts `bytes` at once in the caller's transaction (which
   * also claims and counts the voucher: one durable commit where a hold, a claim and two
   * settlements took four). As a look (db/sql.ts), read with the download's other first looks in
   * one statement: the pool checked without a lock, so a request that cannot fit is refused before
   * the content is read.
   */
  async function wholeDownloadLook(account: Address, bytes: number) {
    const traffic = await pool(account, "traffic");
    const charge = {
      async charge(tx: Queryable) {
        await lockAccount(tx, account);
        const current = (await used(tx, account, { periodStart: traffic.periodStart })).traffic;
        if (current + bytes > traffic.limit) throw refuse("traffic", traffic.limit, current, bytes);
        await addTraffic(tx, account, traffic.periodStart, bytes);
      },
      /** Takes the charge back: the read failed before any byte went out (in `tx`, after `charge` committed). */
      async refund(tx: Queryable) {
        await lockAccount(tx, account);
        await tx.run(ADD_TRAFFIC, [account, traffic.periodStart, -bytes]);
      },
    };
    const inUse = usage(account, { periodStart: traffic.periodStart });
    const look: Look<typeof charge> = {
      ...inUse,
      read(row) {
        const moved = inUse.read(row).traffic;
        if (moved + bytes > traffic.limit) throw refuse("traffic", traffic.limit, moved, bytes);
        return charge;
      },
    };
    return look;
  }

  /**
   * A lasting hold of space, set inside the caller's own transaction (a multipart upload's parts,
   * D18: they are stored before their file is, and must count meanwhile). `lock` first, then `set`
   * it to the bytes it must cover now, valid until `expiresAt`: 402 (the caller's transaction rolls
   * back) when they do not fit beside what is stored and held by others. `takeOver` names holds
   * the lasting one replaces (a part's own, held as its bytes arrived): they count for nothing in
   * the check and are dropped in the same transaction. The pool is read here,
   * before any transaction: no chain call runs inside one.
   */
  async function spaceHold(account: Address, did: string) {
    const space = await pool(account, "space");
    return {
      lock: (tx: Queryable) => lockAccount(tx, account),
      async set(tx: Queryable, bytes: number, expiresAt: number, id: number | null, takeOver: number[] = []): Promise<number> {
        const mine = id === null ? takeOver : [id, ...takeOver];
        const [inUse] = await together(used(tx, account, { stored: storedBytes(did), mine }), drop(tx, takeOver));
        const others = inUse.space;
        if (others + bytes > space.limit) throw refuse("space", space.limit, others, bytes);
        if (id !== null) {
          const kept = await tx.get<{ id: number }>(RENEW, [id, bytes, expiresAt]);
          if (kept) return kept.id;
        }
        const made = await tx.get<{ id: number }>(HOLD, [account, "space", bytes, now(), LASTING, expiresAt]);
        if (!made) throw new Error("INSERT … RETURNING gave no row");
        return made.id;
      },
    };
  }

  /** Gives a lasting hold back (deleting only lowers what counts: no lock needed). */
  async function dropHold(id: number | null): Promise<void> {
    if (id !== null) await drop(sql, [id]);
  }

  /** The quota record of spec 2.6 for one pool: what is left once stored (or moved) bytes and live holds count. */
  async function record(account: Address, did: string, kind: Kind) {
    const { record: r, limit, periodStart } = await pool(account, kind);
    const inUse = (await used(sql, account, kind === "space" ? { stored: storedBytes(did) } : { periodStart }))[kind];
    const gwei = weiToGwei(r.deposit);
    return {
      Nonce: Number(r.nonce),
      Balance: safe(gwei),
      SizeByte: Math.max(0, limit - inUse),
      FreeByte: safe(r.free),
      Expire: Number(r.expire),
    };
  }

  /**
   * Clears holds whose time is up (at start, and whenever called later). A live hold — another
   * gateway's, or this one's — is never touched: it stops counting only once it expires.
   */
  function clearStale(): Promise<number> {
    return sql.run(CLEAR_STALE, [now()]);
  }

  /**
   * Clears every hold of this gateway's id, live or not: at start, before anything is served, they
   * are the holds of its previous process, dead with its transfers (a kill -9, a power cut), which
   * would otherwise keep its accounts' pools full until they expire. Never call it while this
   * meter's own transfers run.
   */
  function clearOwn(): Promise<number> {
    return sql.run(CLEAR_OWN, [gateway]);
  }

  /** Live holds by pool, cluster-wide (the metrics' reservations gauge). */
  function live(): Promise<{ pool: string; count: number; bytes: number }[]> {
    return sql.all(LIVE, [now()]);
  }

  return { uploadLook, beginUpload, beginDownload, wholeDownloadLook, spaceHold, dropHold, record, clearStale, clearOwn, live, gateway };
}

export type Meter = ReturnType<typeof createMeter>;
