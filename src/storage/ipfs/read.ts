/**
 * Streams pinned content, or an inclusive byte range of it, from the blob store only (D9: downloads
 * never fetch from the network). Missing or damaged blocks error the stream; memory stays bounded
 * by the read gate however slowly the consumer reads.
 */
import { unixfs, type CatOptions } from "@helia/unixfs";
import type { ByteRange } from "../backend.ts";
import { cidKey, parseCid } from "./cids.ts";
import type { BlobStore } from "../../blob/index.ts";
import { IpfsError } from "./errors.ts";
import { CHUNK_SIZE } from "../cid-options.ts";
import { localStore, ReadGate } from "./local-store.ts";

/** Leaf bytes read ahead of the consumer at most (reads in flight included). */
const READ_AHEAD = 8 * 1_048_576;

export interface ReadDeps {
  store: BlobStore;
  /** Size of pinned content, or undefined when not pinned (unpinned leftovers count as absent). */
  pinnedSize(cid: string): Promise<number | undefined>;
}

export function readContent(deps: ReadDeps, cidText: string, range?: ByteRange): ReadableStream<Uint8Array> {
  const abort = new AbortController();
  const gate = new ReadGate(READ_AHEAD, CHUNK_SIZE);
  let chunks: AsyncIterator<Uint8Array> | undefined;

  const open = async (): Promise<AsyncIterator<Uint8Array>> => {
    const cid = parseCid(cidText);
    const size = await deps.pinnedSize(cidKey(cid));
    if (size === undefined) throw new IpfsError("IPFS_NOT_FOUND", `no pinned content ${cidKey(cid)}`);
    const options: CatOptions = { offline: true, signal: abort.signal };
    if (range) {
      if (!validRange(range, size)) throw new IpfsError("IPFS_BAD_RANGE", `range ${range.start}-${range.end} outside 0-${size - 1}`);
      options.offset = range.start;
      options.length = range.end - range.start + 1;
    }
    return unixfs({ blockstore: localStore(deps.store, gate) }).cat(cid, options)[Symbol.asyncIterator]();
  };

  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        chunks ??= await open();
        for (;;) {
          const next = await chunks.next();
          if (next.done) return controller.close();
          gate.handed(next.value.byteLength);
          // A range ending on a leaf boundary makes the exporter read the next leaf and yield it
          // empty; a stream chunk should carry bytes.
          if (next.value.byteLength === 0) continue;
          return controller.enqueue(next.value);
        }
      } catch (err) {
        abort.abort(err);
        controller.error(err);
      }
    },
    async cancel(reason) {
      abort.abort(reason);
      await chunks?.return?.();
    },
  }, { highWaterMark: 0 });
}

function validRange({ start, end }: ByteRange, size: number): boolean {
  return Number.isSafeInteger(start) && Number.isSafeInteger(end) && start >= 0 && start <= end && end < size;
}
