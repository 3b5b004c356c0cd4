/**
 * Downloads: counted as they are sent, or read whole. An upload's bytes are metered where every
 * write is, in the pipeline (pipeline.ts).
 */

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

/** A body read whole: one part (what dfs gives for up to a chunk) is the body as it is, more are
 * copied once into one buffer (Bun.readableStreamToBytes always copied: ≈ 14 % of a ranged GET's
 * samples, most of it the page faults of a fresh 1 MiB buffer). */
export async function wholeOf(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let n = 0;
  for await (const part of stream) {
    parts.push(part);
    n += part.byteLength;
  }
  if (parts.length === 1) return parts[0] as Uint8Array;
  const out = new Uint8Array(n);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.byteLength;
  }
  return out;
}
