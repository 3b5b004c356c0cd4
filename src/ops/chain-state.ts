/**
 * The embedded chain's state, for a backup: a copy that a restored data dir's chain starts from,
 * taken after the database's snapshot, so the chain is never behind the rows that mention it (an
 * operator nonce, an indexed event): what happened on the chain after the snapshot, the restored
 * gateway's indexer reads again from its cursor.
 *
 * - anvil, running: its own dump (`anvil_dumpState` over the data dir's socket: gzip of the JSON
 *   it keeps in `chain/state.json`), since the file is rewritten in place every 2 s and a copy
 *   could catch it half written. Stopped: the file, or its last good copy (`state.json.prev`).
 * - the in-process EVM: its journal is append-only, fsynced record by record; a copy taken while
 *   the server appends is cut to its last whole record.
 */
import { existsSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { anvilState, chainDir, evmDir, readDevnetRecord, socketPath } from "../chain/devnet.ts";
import { ipcEndpoint, rpcCall } from "../chain/endpoint.ts";
import { JOURNAL_FILE, scanJournal } from "../chain/evm/journal.ts";
import { BackupError, type ChainEngine } from "./manifest.ts";

/** The engine whose state the data dir holds, or null (an external chain, or never started). */
export function chainEngineOf(dataDir: string): ChainEngine | null {
  if (existsSync(anvilState(dataDir))) return "anvil";
  if (existsSync(join(evmDir(dataDir), JOURNAL_FILE))) return "evm";
  return null;
}

/** The chain's files to keep beside its state: where its contracts are. */
export const deploymentPath = (dataDir: string) => join(chainDir(dataDir), "deployment.json");

export interface ChainState {
  engine: ChainEngine;
  /** Where the state goes, relative to the data dir (and the backup). */
  path: string;
  bytes: Uint8Array;
}

const parses = (bytes: Uint8Array) => {
  try {
    JSON.parse(new TextDecoder().decode(bytes));
    return true;
  } catch {
    return false;
  }
};

/** A consistent copy of the embedded chain's state; `running`: a server holds the data dir. */
export async function readChainState(dataDir: string, running: boolean): Promise<ChainState | undefined> {
  const engine = chainEngineOf(dataDir);
  if (engine === null) return undefined;
  if (engine === "evm") {
    const file = join(evmDir(dataDir), JOURNAL_FILE);
    const bytes = readFileSync(file);
    const { good } = scanJournal(bytes);
    return { engine, path: relative(dataDir, file), bytes: bytes.subarray(0, good) };
  }
  const file = anvilState(dataDir);
  const path = relative(dataDir, file);
  if (running) {
    const record = readDevnetRecord(dataDir);
    if (record?.engine !== "anvil") throw new BackupError(`the embedded chain of ${dataDir} is not running yet (the server is starting?): try again in a moment`);
    const endpoint = ipcEndpoint(socketPath(dataDir), 60_000);
    try {
      const dump = await rpcCall<string>(endpoint, "anvil_dumpState");
      return { engine, path, bytes: Bun.gunzipSync(Buffer.from(dump.replace(/^0x/, ""), "hex")) };
    } catch (err) {
      throw new BackupError(`the embedded chain did not give its state: ${(err as Error).message}`);
    } finally {
      endpoint.close();
    }
  }
  for (const candidate of [file, `${file}.prev`]) {
    if (!existsSync(candidate)) continue;
    const bytes = readFileSync(candidate);
    if (parses(bytes)) return { engine, path, bytes };
  }
  throw new BackupError(`${file} is damaged and there is no good copy beside it`);
}
