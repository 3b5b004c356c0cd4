/**
 * Directory contract events (contracts/Directory.sol) as the index stores them: a position in the
 * chain, the (owner, Mid) pair they concern, and their other fields with bigints as decimal
 * strings, so one shape serves the live indexer, the event log and rollback replays.
 */
import { getAddress, type Address } from "viem";
import type { IndexedEvent } from "../chain/indexer.ts";

export interface EntryFields {
  name: string;
  /** uint64, decimal. */
  size: string;
  /** uint64 gwei, decimal. */
  price: string;
  isPublic: boolean;
  keywords: string[];
}

interface Position {
  block: number;
  logIndex: number;
  tx: string;
  owner: Address;
  mid: string;
}

export type DirectoryEvent = Position &
  (
    | { kind: "Published" | "Updated"; data: EntryFields }
    | { kind: "Unpublished"; data: Record<string, never> }
    | { kind: "ReadGranted" | "ReadRevoked"; data: { reader: Address } }
    | { kind: "ReadBought"; data: { reader: Address; paid: string } }
  );

export type DirectoryEventKind = DirectoryEvent["kind"];

const str = (v: unknown) => (typeof v === "string" ? v : String(v ?? ""));
const addr = (v: unknown) => getAddress(str(v));

/** One decoded log as a DirectoryEvent; undefined for an event the directory does not know. */
export function toDirectoryEvent(e: IndexedEvent): DirectoryEvent | undefined {
  const a = e.args;
  const at: Position = { block: Number(e.blockNumber), logIndex: e.logIndex, tx: e.transactionHash, owner: addr(a.owner), mid: str(a.mid) };
  switch (e.eventName) {
    case "Published":
    case "Updated":
      return {
        ...at,
        kind: e.eventName,
        data: {
          name: str(a.name),
          size: str(a.size),
          price: str(a.price),
          isPublic: a.isPublic === true,
          keywords: Array.isArray(a.keywords) ? a.keywords.map(str) : [],
        },
      };
    case "Unpublished":
      return { ...at, kind: "Unpublished", data: {} };
    case "ReadGranted":
    case "ReadRevoked":
      return { ...at, kind: e.eventName, data: { reader: addr(a.reader) } };
    case "ReadBought":
      return { ...at, kind: "ReadBought", data: { reader: addr(a.reader), paid: str(a.paid) } };
    default:
      return undefined;
  }
}
