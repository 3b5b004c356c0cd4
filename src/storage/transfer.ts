/**
 * Byte streams with a meter: counts (and, when the signed payload is a SHA-256, hashes) an upload
 * as it flows, stopping it past a limit; or counts a download as it is sent, calling `done` with
 * the real count however it ends. An upload signed with its Cid (D5) is not hashed here: the
 * back-end's Cid already covers every byte, and hashing twice cost the JS thread ≈ 1 ms per MiB.
 */
import type { Readable } from "node:stream";
import { StorageError } from "../http/errors.ts";
import type { Failure } from "../failure.ts";

export interface UploadMeter {
  bytes: number;
  /** The SHA-256 of the bytes that passed, in hex; only when `meterUpload` was asked to hash. */
  sha256(): string;
  /** Why the stream was stopped, if the meter stopped it. */
  failure?: StorageError | Failure;
  /** The file part itself failed (the client went away or sent a broken body). */
  interrupted?: boolean;
}

/** The file part as a web stream that hashes and counts; errors once more than `limit` bytes came. */
export function meterUpload(
  file: Readable,
  limit: number,
  overLimit: () => StorageError | Failure,
  /** Sees each chunk's size before it is passed on; throwing (a quota refusal) stops the upload. */
  onBytes: (n: number) => void | Promise<void> = () => {},
  opts: { sha256?: boolean } = {},
): { stream: ReadableStream<Uint8Array>; meter: UploadMeter } {
  const hasher = opts.sha256 === false ? undefined : new Bun.CryptoHasher("sha256");
  const meter: UploadMeter = {
    bytes: 0,
    sha256: () => {
      if (!hasher) throw new Error("meterUpload: this upload was not hashed");
      return hasher.digest("hex");
    },
  };
  const it = file[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      let next: IteratorResult<Buffer>;
      try {
        next = await it.next();
      } catch (err) {
        meter.interrupted = true;
        // The form itself refused the upload (a second file part): that is the answer, whatever
        // a back-end wraps the stream's error in.
        if (err instanceof StorageError) meter.failure = err;
        throw err;
      }
      const { value, done } = next;
      if (done) return controller.close();
      meter.bytes += value.byteLength;
      try {
        if (meter.bytes > limit) throw overLimit();
        await onBytes(value.byteLength);
      } catch (err) {
        meter.failure = err as StorageError | Failure;
        file.destroy();
        return controller.error(err);
      }
      hasher?.update(value);
      controller.enqueue(new Uint8Array(value.buffer, value.byteOffset, value.byteLength));
    },
    cancel() {
      file.destroy();
    },
  });
  return { stream, meter };
}

/** Passes a download through, reporting how many bytes went out when it ends, fails or is cancelled
 * (`flowing` hears of each chunk: the quota hold is renewed while bytes flow). The report is
 * awaited before the stream ends, so the counters are settled by the time the client sees the end. */
export function meterDownload(source: ReadableStream<Uint8Array>, done: (bytes: number) => void | Promise<void>, flowing: () => void = () => {}): ReadableStream<Uint8Array> {
  let bytes = 0;
  let reported = false;
  const report = async () => {
    if (!reported) {
      reported = true;
      await done(bytes);
    }
  };
  const reader = source.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { value, done: end } = await reader.read();
        if (end) {
          await report();
          return controller.close();
        }
        bytes += value.byteLength;
        flowing();
        controller.enqueue(value);
      } catch (err) {
        await report();
        controller.error(err);
      }
    },
    async cancel(reason) {
      await report();
      return reader.cancel(reason);
    },
    // No read-ahead: a chunk is pulled only when the consumer asks for one, so what was counted
    // is what was handed on, even when the client goes away half way.
  }, { highWaterMark: 0 });
}
