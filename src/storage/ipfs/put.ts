/**
 * Imports a byte stream as UnixFS with the options of D9 (`addByteStream`), streaming: the
 * chunker holds one 1 MiB chunk and the importer a few blocks in flight, whatever the file size.
 * Blocks land unpinned; pinning is the caller's `commit`.
 */
import { unixfs } from "@helia/unixfs";
import type { CID } from "multiformats/cid";
import { IpfsError } from "./errors.ts";
import { d9ImporterOptions } from "../cid-options.ts";
import type { IpfsHelia } from "./node.ts";

export interface Imported {
  cid: CID;
  size: number;
}

export async function importStream(helia: IpfsHelia, source: ReadableStream<Uint8Array>, signal?: AbortSignal): Promise<Imported> {
  const counted = { bytes: 0 };
  try {
    signal?.throwIfAborted();
    const cid = await unixfs(helia).addByteStream(readAll(source, counted, signal), { ...d9ImporterOptions(), signal });
    signal?.throwIfAborted();
    return { cid, size: counted.bytes };
  } catch (err) {
    throw new IpfsError("IPFS_IMPORT_FAILED", `import failed: ${(err as Error)?.message ?? String(err)}`, { cause: err });
  }
}

/** The stream as an async iterable that counts bytes and stops on `signal`. */
async function* readAll(source: ReadableStream<Uint8Array>, counted: { bytes: number }, signal?: AbortSignal): AsyncGenerator<Uint8Array> {
  const reader = source.getReader();
  // A pending read() does not see the signal; cancelling the reader ends it (as "done", which the
  // check after each read tells apart from a real end).
  const onAbort = () => void reader.cancel(signal?.reason).catch(() => {});
  signal?.addEventListener("abort", onAbort, { once: true });
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      signal?.throwIfAborted();
      if (done) {
        finished = true;
        return;
      }
      counted.bytes += value.byteLength;
      yield value;
    }
  } finally {
    signal?.removeEventListener("abort", onAbort);
    // Stopped early (an importer error): tell the producer nobody reads any more.
    if (!finished) await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}
