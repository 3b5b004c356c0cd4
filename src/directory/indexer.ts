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
import type { Address } from "viem";
import { directoryAbi } from "../chain/artifacts/index.ts";
import type { Consumer } from "../chain/indexer.ts";
import { toDirectoryEvent, type DirectoryEvent } from "./events.ts";
import { directoryState } from "./state.ts";

export interface DirectoryConsumerOptions {
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

const LOG = "INSERT INTO directory_events (block, log_index, tx, kind, owner, mid, data) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING";
const TOUCHED_AFTER = "SELECT DISTINCT owner, mid FROM directory_events WHERE block > $1";
const DROP_AFTER = "DELETE FROM directory_events WHERE block > $1";
const LAST_PUBLISHED = "SELECT block, log_index FROM directory_events WHERE owner = $1 AND mid = $2 AND kind = 'Published' ORDER BY block DESC, log_index DESC LIMIT 1";
const SINCE = "SELECT block, log_index, tx, kind, owner, mid, data FROM directory_events WHERE owner = $1 AND mid = $2 AND (block > $3 OR (block = $3 AND log_index >= $4)) ORDER BY block, log_index";

export function directoryConsumer(opts: DirectoryConsumerOptions): Consumer {
  const state = directoryState(opts.chainId);

  return {
    name: opts.name ?? "directory",
    address: opts.address,
    abi: directoryAbi,
    fromBlock: opts.fromBlock,
    async apply(tx, events) {
      for (const raw of events) {
        const e = toDirectoryEvent(raw);
        if (!e) continue;
        const logged = await tx.run(LOG, [e.block, e.logIndex, e.tx, e.kind, e.owner, e.mid, JSON.stringify(e.data)]);
        if (logged === 0) continue;
        await state.applyEvent(tx, e);
      }
    },
    async rollback(tx, block) {
      const after = Number(block);
      const touched = await tx.all<{ owner: string; mid: string }>(TOUCHED_AFTER, [after]);
      await tx.run(DROP_AFTER, [after]);
      for (const { owner, mid } of touched) {
        await state.clear(tx, owner, mid);
        const start = await tx.get<{ block: number; log_index: number }>(LAST_PUBLISHED, [owner, mid]);
        if (!start) continue;
        for (const row of await tx.all<LoggedRow>(SINCE, [owner, mid, start.block, start.log_index])) await state.applyEvent(tx, fromLog(row));
      }
    },
  };
}
