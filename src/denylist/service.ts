/**
 * The denylist (D25): content this gateway will not serve or store. Two sources — the IPIP-383
 * files of STOWAGE_DENYLIST (files.ts), read again when they change, and the operator's own
 * blocks in the database (operator.ts), which every gateway of a cluster reads again when they
 * change (one cheap query each `pollMs`) — matched in memory, so a check costs no I/O.
 *
 * Every read path asks `check` (downloads on both back-ends, S3 GetObject, the path gateway);
 * the ones that serve single blocks (bitswap, the trustless gateway) ask `servable`, which also
 * refuses a block that only blocked content contains, so the blocks of a blocked file cannot be
 * fetched one by one. Every write path asks `refuseUpload` with the content's Cid before its file
 * row commits — uploads over HTTP and S3 today, pins and CAR imports alike. A refusal throws
 * `ContentBlocked` (410 at each API's edge) and is counted for /metrics by door. Blocking never
 * deletes anything: lifting a block serves the same content again.
 *
 * @example
 *   const denylist = await createDenylist({ sql, log, files: config.denylist, onBlocked: metrics.blocked })
 *   denylist.check("bafy…", "download")               // throws ContentBlocked when blocked
 *   denylist.refuseUpload(pending.cid, "upload")
 */
import type { CID } from "multiformats/cid";
import type { Sql } from "../db/sql.ts";
import type { Logger } from "../log.ts";
import { ContentBlocked } from "./errors.ts";
import { watchDenylistFiles, type DenylistFiles } from "./files.ts";
import { parseAnyCid, parseRule, trimSlashes } from "./format.ts";
import { blocks, version } from "./operator.ts";
import { decide, Query, RuleSet, type Placed } from "./rules.ts";

/** Where a blocked request came in: the label of /metrics' count. Writes are "upload" (HTTP
 * and S3), "pin" (the Pinning Service API) and "import" (CAR imports). */
export type Door = "download" | "s3" | "trustless" | "path" | "bitswap" | "upload" | "pin" | "import";

/** How often a gateway looks for the operator's new blocks. */
export const OPERATOR_POLL_MS = 1000;
/** A block contained in more roots than this is common (zeros, a shared header): it is served
 * unless blocked itself, rather than reading every root that holds it. */
const ROOTS_READ = 64;

export interface DenylistDeps {
  sql: Sql;
  log: Logger;
  /** STOWAGE_DENYLIST: compact denylist files, matched in this order. */
  files?: readonly string[];
  pollMs?: number;
  fileCheckMs?: number;
  /** Hears of each refusal (the server's metrics). */
  onBlocked?: (door: Door) => void;
}

export interface Denylist {
  /** The rule that blocks `cid` with `path` below it ("" or absent: the CID itself), or undefined.
   * The operator's blocks come last: an exception in a file does not lift them. */
  blocking(cid: CID | string, path?: string): Placed | undefined;
  /** Throws ContentBlocked (counted for `door`) when `cid` (with `path`) is blocked. */
  check(cid: CID | string, door: Door, path?: string): void;
  /**
   * The one check of every write path: throws ContentBlocked (an upload's refusal, counted for
   * `door`) when the content `cid` is blocked. Called with the content's Cid before its file row
   * commits, so a refused upload keeps nothing.
   */
  refuseUpload(cid: CID | string, door?: Door): void;
  /**
   * Whether a single block may be served (bitswap, the trustless gateway): not blocked itself, and
   * not contained only in blocked content. `roots` lists the pinned roots (Cids) whose DAG holds
   * it, up to `limit`; it is called only while some rule is in force. Counts a refusal for `door`.
   */
  servable(cid: CID, door: Door, roots: (limit: number) => Promise<string[]>): Promise<boolean>;
  /** Rules in force: from the files, and the operator's. */
  readonly size: { files: number; operator: number };
  /** Reads the operator's blocks and the files again now, if they changed. */
  refresh(): Promise<void>;
  stop(): void;
}

const asCid = (cid: CID | string): CID => (typeof cid === "string" ? parseAnyCid(cid) : cid);

export async function createDenylist(deps: DenylistDeps): Promise<Denylist> {
  const { sql, log } = deps;
  // Every list in the order it decides: the files as given, then the operator's (whose blocks no
  // exception in a file lifts). Replaced whole when one changes, so a check reads one snapshot.
  let fromFiles: RuleSet[] = [];
  let fromOperator = new RuleSet("operator", []);
  let lists: RuleSet[] = [];
  let size = 0;
  const rebuild = () => {
    lists = [...fromFiles, fromOperator].filter((l) => l.size > 0);
    size = lists.reduce((n, l) => n + l.size, 0);
  };
  const files: DenylistFiles = await watchDenylistFiles(deps.files ?? [], {
    log,
    intervalMs: deps.fileCheckMs,
    onChange: () => {
      fromFiles = files.lists();
      rebuild();
    },
  });
  fromFiles = files.lists();
  rebuild();

  let seen = "";
  let failing = false;
  async function readOperator(): Promise<void> {
    try {
      const now = await version(sql);
      if (now === seen) return;
      const rows = await blocks(sql);
      fromOperator = new RuleSet("operator", rows.flatMap((r) => safeRules(r.rule, r.id)));
      rebuild();
      seen = now;
      if (failing) log.info("operator denylist read again");
      failing = false;
    } catch (err) {
      // The blocks already read stay in force; said once per failing streak.
      if (!failing) log.error("reading the operator's denylist failed: the blocks read before stay in force", { err: (err as Error).message });
      failing = true;
    }
  }
  /** A stored rule as the matcher reads it; one that no longer parses is logged and skipped. */
  function safeRules(text: string, id: number) {
    try {
      return parseRule(text, id);
    } catch (err) {
      log.error("operator block not understood", { id, rule: text, err: (err as Error).message });
      return [];
    }
  }
  await readOperator();
  let polling: Promise<void> | undefined;
  const poll = () => (polling ??= readOperator().finally(() => (polling = undefined)));
  const timer = setInterval(() => void poll(), deps.pollMs ?? OPERATOR_POLL_MS);
  timer.unref();

  const blocking = (cid: CID | string, path = ""): Placed | undefined => (size === 0 ? undefined : decide(lists, new Query(asCid(cid), trimSlashes(path))));
  const refuse = (cid: CID | string, door: Door, upload: boolean, path?: string) => {
    if (size === 0) return;
    if (!blocking(cid, path)) return;
    deps.onBlocked?.(door);
    throw new ContentBlocked(String(cid), upload);
  };

  return {
    blocking,
    check: (cid, door, path) => refuse(cid, door, false, path),
    refuseUpload: (cid, door = "upload") => refuse(cid, door, true),
    async servable(cid, door, roots) {
      if (size === 0) return true;
      let blocked = blocking(cid) !== undefined;
      if (!blocked) {
        const holders = await roots(ROOTS_READ + 1);
        blocked = holders.length > 0 && holders.length <= ROOTS_READ && holders.every((r) => blocking(r) !== undefined);
      }
      if (blocked) deps.onBlocked?.(door);
      return !blocked;
    },
    get size() {
      return { files: fromFiles.reduce((n, l) => n + l.size, 0), operator: fromOperator.size };
    },
    async refresh() {
      await Promise.all([poll(), files.check()]);
    },
    stop() {
      clearInterval(timer);
      files.stop();
    },
  };
}
