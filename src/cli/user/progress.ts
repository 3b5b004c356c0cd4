/**
 * Progress of a long transfer on stderr: bytes so far, of how many, and MiB/s. On a terminal one
 * line is rewritten in place (at most 10 times a second); into a file or pipe (`--progress`
 * without a terminal) a plain line is written at most once a second, so logs stay readable.
 */
import { formatBytes } from "./common.ts";

export interface Progress {
  add(bytes: number): void;
  /** Ends the line with a summary. */
  done(): void;
  /** Ends the line without a summary (the error says what happened). */
  abort(): void;
}

const none: Progress = { add() {}, done() {}, abort() {} };

export function createProgress(label: string, total: number | undefined, o: { enabled: boolean; tty: boolean; write?: (s: string) => void }): Progress {
  if (!o.enabled) return none;
  const write = o.write ?? ((s: string) => void process.stderr.write(s));
  const started = performance.now();
  const every = o.tty ? 100 : 1000;
  let bytes = 0;
  // The first line waits one interval too: a rate over the first milliseconds means nothing.
  let shown = started;
  let open = false;

  const rate = () => {
    const seconds = (performance.now() - started) / 1000;
    return seconds > 0 ? bytes / 2 ** 20 / seconds : 0;
  };
  const text = () => {
    const of = total !== undefined && total > 0 ? ` / ${formatBytes(total)} (${Math.floor((bytes / total) * 100)}%)` : "";
    return `${label}: ${formatBytes(bytes)}${of}  ${rate().toFixed(1)} MiB/s`;
  };
  const show = () => {
    shown = performance.now();
    if (o.tty) {
      write(`\r${text()}\x1b[K`);
      open = true;
    } else write(`${text()}\n`);
  };

  return {
    add(n) {
      bytes += n;
      if (performance.now() - shown >= every) show();
    },
    done() {
      const seconds = (performance.now() - started) / 1000;
      const summary = `${label}: ${formatBytes(bytes)} in ${seconds.toFixed(1)} s, ${rate().toFixed(1)} MiB/s`;
      write(o.tty ? `\r${summary}\x1b[K\n` : `${summary}\n`);
      open = false;
    },
    abort() {
      if (open) write("\n");
      open = false;
    },
  };
}

/** A pass-through stream that reports each chunk's size. */
export function counting(stream: ReadableStream<Uint8Array>, progress: Progress): ReadableStream<Uint8Array> {
  return stream.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        progress.add(chunk.byteLength);
        controller.enqueue(chunk);
      },
    }),
  );
}
