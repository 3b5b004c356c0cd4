/**
 * The directory's consumer for the chain event indexer (src/chain/indexer.ts).
 *
 * apply: each Directory event is written to `directory_events`, keyed by its chain position
 * (block, logIndex), and then to the state; both happen in the indexer's transaction together
 * with its cursor. An event whose position is already logged is skipped, so even a range
 * delivered twice changes nothing twice.
 *
 * rollback(block): the log is the history. The events after `block` are deleted; every (owner,
 * Mid) pair they touched is cleared and rebuilt by replaying its remaining events from its last
 * Published (a publish starts from nothing: the contract never publishes over an existing entry
 * and an unpublish drops grants and purchases). Pairs the rewind did not touch are not read.
 */
import type { Database } from "bun:sqlite";
import type { Address } from "viem";
import { directoryAbi } from "../chain/artifacts/index.ts";
import type { Consumer } from "../chain/indexer.ts";
import { toDirectoryEvent, type DirectoryEvent } from "./events.ts";
import { directoryState } from "./state.ts";

export interface DirectoryConsumerOptions {
  sqlite: Database;
  chainId: number;
  /** The Directory contract. */
  address: Address;
  /** Its deployment block. */
  fromBlock: bigint;
  /** Cursor name; "directory" unless a test runs two. */
  name?: string;
}

interface LoggedRow {
  block: number;
  log_index: number;
  tx: string;
  kind: DirectoryEvent["kind"];
  owner: Address;
  mid: string;
  data: string;
}

const fromLog = (r: LoggedRow) => ({ block: r.block, logIndex: r.log_index, tx: r.tx, kind: r.kind, owner: r.owner, mid: r.mid, data: JSON.parse(r.data) }) as DirectoryEvent;

export function directoryConsumer(opts: DirectoryConsumerOptions): Consumer {
  const { sqlite } = opts;
  const state = directoryState(sqlite, opts.chainId);
  const q = {
    log: sqlite.prepare<never, [number, number, string, string, string, string, string]>(
      "INSERT INTO directory_events (block, log_index, tx, kind, owner, mid, data) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
    ),
    touchedAfter: sqlite.prepare<{ owner: string; mid: string }, [number]>("SELECT DISTINCT owner, mid FROM directory_events WHERE block > ?"),
    dropAfter: sqlite.prepare<never, [number]>("DELETE FROM directory_events WHERE block > ?"),
    lastPublished: sqlite.prepare<{ block: number; log_index: number }, [string, string]>(
      "SELECT block, log_index FROM directory_events WHERE owner = ? AND mid = ? AND kind = 'Published' ORDER BY block DESC, log_index DESC LIMIT 1",
    ),
    since: sqlite.prepare<LoggedRow, [string, string, number, number, number]>(
      "SELECT * FROM directory_events WHERE owner = ? AND mid = ? AND (block > ? OR (block = ? AND log_index >= ?)) ORDER BY block, log_index",
    ),
  };

  return {
    name: opts.name ?? "directory",
    address: opts.address,
    abi: directoryAbi,
    fromBlock: opts.fromBlock,
    apply(_tx, events) {
      for (const raw of events) {
        const e = toDirectoryEvent(raw);
        if (!e) continue;
        const logged = q.log.run(e.block, e.logIndex, e.tx, e.kind, e.owner, e.mid, JSON.stringify(e.data));
        if (logged.changes === 0) continue;
        state.applyEvent(e);
      }
    },
    rollback(_tx, block) {
      const after = Number(block);
      const touched = q.touchedAfter.all(after);
      q.dropAfter.run(after);
      for (const { owner, mid } of touched) {
        state.clear(owner, mid);
        const start = q.lastPublished.get(owner, mid);
        if (!start) continue;
        for (const row of q.since.all(owner, mid, start.block, start.block, start.log_index)) state.applyEvent(fromLog(row));
      }
    },
  };
}
