/**
 * A download counted as it is sent. An upload's bytes are metered where every write is, in the
 * pipeline (pipeline.ts).
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
