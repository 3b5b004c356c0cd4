/**
 * The Pinning Service API's service (D25): pin requests of an account, made, listed, replaced and
 * removed through the routes, and worked by a background worker on one gateway of the cluster at
 * a time (each row under its own lease, requests.ts).
 *
 * A pin is an upload whose bytes come from bitswap: the worker dials the pin's origins (the
 * configured peers stay dialled anyway), walks the DAG block by block (dag.ts; each block checked
 * against its Cid, held against the account's quota as it arrives, written under the upload's
 * lease) and records it as the account's `ipfs` file named by the pin's name (else its Cid)
 * through the one write path (storage/pipeline.ts `record`, by direct.ts: the file row, its content's
 * rows and the quota's exact check in one transaction). Whatever fails — the pools are full, a
 * block is bad, the fetch runs past its time — the pin is `failed` with the reason in
 * `info.status_details`, and nothing of it is kept or charged.
 *
 * Removing a pin request forgets the request (a pin in flight stops at its next lease renewal and
 * keeps nothing); a pinned file stays among the account's ipfs files, as every ipfs file does.
 *
 * @example
 *   const pins = createPins({ sql, log, chainId, findToken, storage: direct, ipfs: () => backends.ipfs, holder: gatewayId, settings })
 *   const status = await pins.add(await pins.caller(headers.authorization), { cid })
 *   pins.worker.start()
 */
import { multiaddr, type Multiaddr } from "@multiformats/multiaddr";
import { CID } from "multiformats/cid";
import type { Sql } from "../db/sql.ts";
import { Failure } from "../failure.ts";
import { parseDid, type Did } from "../identity/did.ts";
import type { Logger } from "../log.ts";
import type { PendingPut } from "../storage/backend.ts";
import type { IpfsBackend } from "../storage/ipfs/index.ts";
import type { FileRow } from "../storage/files.ts";
import { walkDag } from "./dag.ts";
import { pinsError, pinsErrorOf, PinsError, type PinReason } from "./errors.ts";
import { publicOrigin } from "./origins.ts";
import { allPins, claimPin, latestPin, letGoOwn, finishPin, getPin, insertPin, letGo, listPins, openPins, pinsByStatus, removePin, renewPin, type PinFilter, type PinRow, type PinStatusName } from "./requests.ts";

/** What a pin needs of the ipfs back-end. */
export type PinBackend = Pick<IpfsBackend, "putDag" | "fetchBlock" | "dial" | "multiaddrs">;

export interface PinSettings {
  /** ms a pin may take before it fails. */
  pinTimeout: number;
  /** Pins one account may have queued or pinning. */
  pinQueue: number;
  /** "public": origins on loopback and private addresses are not dialled. */
  pinOrigins: "public" | "any";
}

export interface PinsDeps {
  sql: Sql;
  log: Logger;
  chainId: number;
  /** The account a Bearer token of scope pins acts for, if it may now (keys/service.ts `findPinsToken`). */
  findToken(token: string): Promise<{ did: string } | undefined>;
  /** The one write path, through its access-key door (storage/direct.ts). */
  storage: {
    record(who: Did, kind: "ipfs", name: string, make: (onBytes: (n: number) => Promise<void>) => Promise<PendingPut>): Promise<FileRow>;
    mayStore(who: Did): Promise<void>;
  };
  /** The ipfs back-end, when open. */
  ipfs(): PinBackend | undefined;
  /** This gateway's id in the cluster: the holder of the leases it takes. */
  holder: string;
  settings: PinSettings;
  /**
   * Content this gateway refuses to store (the denylist's refusal of a write): called with the
   * root's canonical Cid before any block is fetched; throwing fails the pin with CONTENT_BLOCKED.
   */
  refuse?(cid: string): void;
  /** How often an idle worker looks for work (default 1 s). */
  pollMs?: number;
  now?: () => number;
}

/** A pin as the client sends it (the spec's Pin). */
export interface PinInput {
  cid: string;
  name?: string;
  origins?: string[];
  meta?: Record<string, string>;
}

/** Pin requests one account may keep (any status): bounds the table a token can fill. */
export const MAX_PINS_PER_ACCOUNT = 100_000;
/** A worker's lease on a pin lapses this long after its last renewal. */
export const PIN_LEASE_MS = 30_000;
const RENEW_MS = 10_000;
/** Pins one gateway works at once. */
const WORKERS = 2;
/** Blocks of one DAG at most (its bytes are bounded by the quota and the body limit). */
export const MAX_DAG_BLOCKS = 1_000_000;
/** A dial of one origin gives up after this long (the pin's own time runs on). */
const DIAL_MS = 15_000;
const META_BYTES = 16 * 1024;

const STATUSES: readonly PinStatusName[] = ["queued", "pinning", "pinned", "failed"];
const MATCHES = ["exact", "iexact", "partial", "ipartial"] as const;

const iso = (ms: number) => new Date(ms).toISOString();
const bad = (details: string) => pinsError("BAD_REQUEST", details);

/** The canonical text of a Cid the client gave, or a 400. */
function canonicalCid(text: string): string {
  try {
    return CID.parse(text.trim()).toV1().toString();
  } catch {
    throw bad(`not a CID: ${JSON.stringify(text.slice(0, 100))}`);
  }
}

/** A pin's name as a file name: what an upload's name may be, and nothing cleaned away silently. */
function checkName(name: string): void {
  if (name === "" || name === "." || name === ".." || /[\u0000-\u001f\u007f/\\]/.test(name)) throw bad("name must be a file name: not empty, no / or \\, no control characters");
  if (Buffer.byteLength(name) > 255) throw bad("name is at most 255 bytes");
}

function checkOrigins(origins: readonly string[]): Multiaddr[] {
  if (origins.length > 20) throw bad("origins: at most 20");
  return origins.map((o) => {
    try {
      const ma = multiaddr(o);
      if (!ma.getComponents().some((c) => c.name === "p2p")) throw new Error("no /p2p/ peer id");
      return ma;
    } catch (err) {
      throw bad(`origins: ${JSON.stringify(o.slice(0, 200))} is no multiaddr with a peer id (${(err as Error).message})`);
    }
  });
}

function checkMeta(meta: Record<string, string>): void {
  if (Buffer.byteLength(JSON.stringify(meta)) > META_BYTES) throw bad(`meta is at most ${META_BYTES} bytes of JSON`);
}

export function createPins(deps: PinsDeps) {
  const { sql, log } = deps;
  const now = deps.now ?? Date.now;

  function delegates(): string[] {
    return (deps.ipfs()?.multiaddrs() ?? []).slice(0, 20);
  }

  /** The spec's PinStatus of a row. */
  function statusOf(row: PinRow) {
    const origins: string[] = JSON.parse(row.origins);
    const meta: Record<string, string> = JSON.parse(row.meta);
    return {
      requestid: row.id,
      status: row.status,
      created: iso(row.createdAt),
      pin: { cid: row.cid, ...(row.name !== null && { name: row.name }), ...(origins.length > 0 && { origins }), ...(Object.keys(meta).length > 0 && { meta }) },
      delegates: delegates(),
      info: row.details === null ? {} : { status_details: row.details },
    };
  }

  /** The account of a request's `Authorization: Bearer <token>`, or 401. */
  async function caller(authorization: string | undefined): Promise<Did> {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
    if (!m) throw pinsError("UNAUTHORIZED", "Authorization: Bearer <token> is required: a token of scope pins (stowage keys create --scope pins)");
    const found = await deps.findToken(m[1] as string);
    if (!found) throw pinsError("UNAUTHORIZED", "The access token is unknown, revoked, expired, or not of scope pins");
    return parseDid(found.did, deps.chainId);
  }

  /** Checks a Pin; the row's fields. */
  function rowOf(pin: PinInput) {
    const root = canonicalCid(pin.cid);
    if (pin.name !== undefined) checkName(pin.name);
    const origins = pin.origins ?? [];
    checkOrigins(origins);
    const meta = pin.meta ?? {};
    checkMeta(meta);
    return { cid: pin.cid.trim(), root, name: pin.name ?? null, origins: JSON.stringify(origins), meta: JSON.stringify(meta) };
  }

  async function admit(who: Did, root: string) {
    try {
      // Blocked content is refused at once (the worker asks again: a list may change meanwhile).
      deps.refuse?.(root);
      await deps.storage.mayStore(who);
    } catch (err) {
      if (err instanceof Failure) throw pinsErrorOf(err);
      throw err;
    }
    if (!deps.ipfs()) throw pinsError("UNAVAILABLE", "this gateway runs without its ipfs back-end");
  }

  /** POST /pins: a queued pin request. `replacing`: the request it takes the place of, in the same transaction. */
  async function add(who: Did, pin: PinInput, replacing?: string) {
    const fields = rowOf(pin);
    await admit(who, fields.root);
    const id = crypto.randomUUID();
    let createdAt = now();
    await sql.tx(async (tx) => {
      // `created` pages the list (before/after): unique per account, so no page boundary splits a millisecond.
      createdAt = Math.max(now(), (await latestPin(tx, who.canonical)) + 1);
      if (replacing !== undefined && !(await removePin(tx, who.canonical, replacing))) throw pinsError("NOT_FOUND", "no such pin request");
      if ((await openPins(tx, who.canonical)) >= deps.settings.pinQueue) throw pinsError("TOO_MANY_PINS", `at most ${deps.settings.pinQueue} pins queued or pinning per account: wait for some to finish`);
      if ((await allPins(tx, who.canonical)) >= MAX_PINS_PER_ACCOUNT) throw pinsError("TOO_MANY_PINS", `at most ${MAX_PINS_PER_ACCOUNT} pin requests per account: remove some first`);
      await insertPin(tx, { id, did: who.canonical, createdAt, ...fields });
    });
    log.info("pin queued", { did: who.canonical, requestid: id, cid: fields.root, replaced: replacing });
    kick();
    return statusOf({ id, did: who.canonical, ...fields, status: "queued", details: null, createdAt, updatedAt: createdAt });
  }

  async function get(who: Did, id: string) {
    const row = await getPin(sql, who.canonical, id);
    if (!row) throw pinsError("NOT_FOUND", "no such pin request");
    return statusOf(row);
  }

  async function remove(who: Did, id: string) {
    const row = await removePin(sql, who.canonical, id);
    if (!row) throw pinsError("NOT_FOUND", "no such pin request");
    log.info("pin removed", { did: who.canonical, requestid: id, status: row.status });
  }

  /** GET /pins's query, checked. */
  function filterOf(q: Record<string, string | undefined>): PinFilter {
    const list = (v: string | undefined) => (v === undefined ? undefined : v.split(",").map((s) => s.trim()).filter((s) => s !== ""));
    const cids = list(q.cid);
    if (cids && (cids.length === 0 || cids.length > 10)) throw bad("cid: 1 to 10 CIDs, comma-separated");
    const statuses = list(q.status) ?? ["pinned"];
    if (statuses.length === 0) throw bad("status: at least one of queued, pinning, pinned, failed");
    for (const s of statuses) if (!STATUSES.includes(s as PinStatusName)) throw bad(`status: ${JSON.stringify(s.slice(0, 40))} is none of queued, pinning, pinned, failed`);
    const match = q.match ?? "exact";
    if (!(MATCHES as readonly string[]).includes(match)) throw bad("match: one of exact, iexact, partial, ipartial");
    if (q.name !== undefined && q.name.length > 255) throw bad("name: at most 255 characters");
    const time = (field: string, v: string | undefined) => {
      if (v === undefined) return undefined;
      const ms = Date.parse(v);
      if (!/^\d{4}-\d\d-\d\dT/.test(v) || Number.isNaN(ms)) throw bad(`${field}: an RFC 3339 date-time, such as 2020-07-27T17:32:28Z`);
      return ms;
    };
    let limit = 10;
    if (q.limit !== undefined) {
      if (!/^\d{1,4}$/.test(q.limit) || Number(q.limit) < 1 || Number(q.limit) > 1000) throw bad("limit: an integer from 1 to 1000");
      limit = Number(q.limit);
    }
    let meta: Record<string, string> | undefined;
    if (q.meta !== undefined) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(q.meta);
      } catch {
        throw bad("meta: a JSON object of strings");
      }
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed) || Object.values(parsed).some((v) => typeof v !== "string")) throw bad("meta: a JSON object of strings");
      if (Object.keys(parsed).length > 20) throw bad("meta: at most 20 keys to match");
      meta = parsed as Record<string, string>;
    }
    return {
      roots: cids?.map(canonicalCid),
      statuses: statuses as PinStatusName[],
      name: q.name === undefined ? undefined : { text: q.name, match: match as (typeof MATCHES)[number] },
      before: time("before", q.before),
      after: time("after", q.after),
      meta,
      limit,
    };
  }

  async function list(who: Did, query: Record<string, string | undefined>) {
    const { count, rows } = await listPins(sql, who.canonical, filterOf(query));
    return { count, results: rows.map(statusOf) };
  }

  // ---- the worker

  let timer: ReturnType<typeof setTimeout> | undefined;
  let running = false;
  let stopping = false;
  const active = new Map<string, { abort: AbortController; done: Promise<void> }>();

  /** The reason and text a failed pin shows. */
  function outcomeOf(err: unknown): { reason: PinReason; text: string } {
    if (err instanceof PinsError) return { reason: err.reason, text: err.details };
    if (err instanceof Failure) {
      const mapped = pinsErrorOf(err);
      return { reason: mapped.reason, text: mapped.details };
    }
    return { reason: "FETCH_FAILED", text: String((err as Error)?.message ?? err) };
  }

  async function work(row: PinRow, abort: AbortController): Promise<void> {
    const ipfs = deps.ipfs();
    const lost = new Error("lost the pin's lease");
    const timeout = setTimeout(() => abort.abort(pinsError("TIMEOUT", `the DAG was not fetched within ${Math.round(deps.settings.pinTimeout / 1000)} s`)), deps.settings.pinTimeout);
    const renew = setInterval(() => {
      renewPin(sql, row.id, deps.holder, now() + PIN_LEASE_MS).then(
        (ours) => ours || abort.abort(lost),
        (err) => log.warn("renewing a pin's lease failed", { requestid: row.id, err: (err as Error).message }),
      );
    }, RENEW_MS);
    const began = performance.now();
    try {
      if (!ipfs) throw pinsError("UNAVAILABLE", "this gateway runs without its ipfs back-end");
      const who = parseDid(row.did, deps.chainId);
      const root = CID.parse(row.cid);
      // Before any block comes in: content the operator blocks is never fetched.
      deps.refuse?.(row.root);
      const origins = checkOrigins(JSON.parse(row.origins)).filter((o) => deps.settings.pinOrigins === "any" || publicOrigin(o));
      if (origins.length > 0) await ipfs.dial(origins, AbortSignal.any([abort.signal, AbortSignal.timeout(DIAL_MS)]));
      const file = await deps.storage.record(who, "ipfs", row.name ?? row.cid, (onBytes) =>
        ipfs.putDag(root, (keep) => walkDag(root, { fetch: (cid, signal) => ipfs.fetchBlock(cid, signal), onBytes, keep }, { maxBlocks: MAX_DAG_BLOCKS }, abort.signal)),
      );
      if (await finishPin(sql, row.id, deps.holder, "pinned", null, now())) log.info("pinned", { requestid: row.id, did: row.did, cid: file.cid, size: file.size, ms: Math.round(performance.now() - began) });
    } catch (err) {
      const why = abort.signal.aborted ? abort.signal.reason : err;
      if (why === lost) return void log.info("pin removed or taken over while pinning; stopped", { requestid: row.id });
      if (stopping) return void (await letGo(sql, row.id, deps.holder).catch(() => {}));
      const { reason, text } = outcomeOf(why);
      await finishPin(sql, row.id, deps.holder, "failed", `${reason}: ${text}`, now());
      log.info("pin failed", { requestid: row.id, did: row.did, cid: row.root, reason, err: text });
    } finally {
      clearTimeout(timeout);
      clearInterval(renew);
    }
  }

  /** Claims and starts pins while this gateway has room for more; whether it started any. */
  async function fill(): Promise<boolean> {
    let started = false;
    while (!stopping && active.size < WORKERS) {
      const row = await claimPin(sql, deps.holder, now(), PIN_LEASE_MS);
      if (!row) break;
      started = true;
      const entry = { abort: new AbortController(), done: Promise.resolve() };
      entry.done = work(row, entry.abort)
        .catch((err) => log.error("pin worker failed", { requestid: row.id, err: (err as Error).message }))
        .finally(() => {
          active.delete(row.id);
          kick();
        });
      active.set(row.id, entry);
    }
    return started;
  }

  function schedule(ms: number) {
    if (!running || stopping) return;
    clearTimeout(timer);
    timer = setTimeout(() => void tick(), ms);
    timer.unref?.();
  }

  let ticking = false;
  async function tick() {
    if (ticking) return;
    ticking = true;
    try {
      await fill();
    } catch (err) {
      log.warn("claiming pins failed", { err: (err as Error).message });
    } finally {
      ticking = false;
      schedule(deps.pollMs ?? 1_000);
    }
  }

  /** Looks for work now (a pin was added, or one finished). */
  function kick() {
    if (running && !stopping) schedule(0);
  }

  const worker = {
    start() {
      if (running) return;
      running = true;
      stopping = false;
      void letGoOwn(sql, deps.holder).then(
        (n) => n > 0 && log.info("taking up the pins this gateway's previous process was working", { pins: n }),
        (err) => log.warn("letting go of this gateway's previous pins failed", { err: (err as Error).message }),
      ).finally(() => schedule(0));
    },
    /** Stops claiming; pins in flight stop and are let go, for another gateway (or the next start) to take at once. */
    async stop() {
      stopping = true;
      clearTimeout(timer);
      for (const a of active.values()) a.abort.abort();
      await Promise.all([...active.values()].map((a) => a.done));
      running = false;
    },
  };

  /** Every account's pin requests by status (the metrics). */
  const counts = () => pinsByStatus(sql);

  return { caller, add, get, list, remove, replace: (who: Did, id: string, pin: PinInput) => add(who, pin, id), counts, worker };
}

export type Pins = ReturnType<typeof createPins>;
