/**
 * The chain's durable record: an append-only file of framed records (length, CRC-32, JSON), one
 * per mined block or state change, fsynced before the change is acknowledged. A kill can only cut
 * the last record short; reading stops at the first record that is cut or fails its checksum, the
 * damaged file is kept aside and the journal is truncated to the last good record, so the chain
 * falls back to its last good state instead of being lost.
 */
import { closeSync, copyFileSync, existsSync, fsyncSync, ftruncateSync, openSync, readFileSync, writeSync } from "node:fs";
import type { Logger } from "../../log.ts";

const HEADER = 8;

/** The journal's name in the chain's folder (DATA_DIR/chain/evm). */
export const JOURNAL_FILE = "chain.journal";

export interface Journal {
  append(record: unknown): void;
  close(): void;
}

function frame(record: unknown): Buffer {
  const payload = Buffer.from(JSON.stringify(record), "utf8");
  const out = Buffer.allocUnsafe(HEADER + payload.length);
  out.writeUInt32BE(payload.length, 0);
  out.writeUInt32BE(Bun.hash.crc32(payload) >>> 0, 4);
  payload.copy(out, HEADER);
  return out;
}

/**
 * Walks the framed records of `bytes` from the start, handing each whole one to `apply`; stops at
 * the first that is cut short or fails its checksum. Returns the length of the good prefix, how
 * many records it holds, and why it stopped early (undefined when every byte was good).
 */
export function scanJournal(bytes: Uint8Array, apply: (record: unknown) => void = () => {}): { good: number; count: number; damage?: string } {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let good = 0;
  let count = 0;
  while (good < buf.length) {
    if (buf.length - good < HEADER) return { good, count, damage: "cut short" };
    const length = buf.readUInt32BE(good);
    const end = good + HEADER + length;
    if (end > buf.length) return { good, count, damage: "cut short" };
    const payload = buf.subarray(good + HEADER, end);
    if ((Bun.hash.crc32(payload) >>> 0) !== buf.readUInt32BE(good + 4)) return { good, count, damage: "checksum mismatch" };
    let record: unknown;
    try {
      record = JSON.parse(payload.toString("utf8"));
    } catch {
      return { good, count, damage: "not JSON" };
    }
    // A record that passed its checksum is what was written: one that cannot be used (another
    // chain id, a newer format) stops the start and the file stays as it is.
    apply(record);
    good = end;
    count++;
  }
  return { good, count };
}

/** Replays every good record through `apply` and opens the file for appending after the last
 * good one. An error thrown by `apply` is passed on, with the file untouched. */
export function openJournal(file: string, apply: (record: unknown) => void, log: Logger): Journal {
  const bytes = existsSync(file) ? readFileSync(file) : Buffer.alloc(0);
  const { good, count, damage } = scanJournal(bytes, apply);
  const fd = openSync(file, "a+", 0o600);
  if (damage !== undefined) {
    const aside = `${file}.damaged`;
    copyFileSync(file, aside);
    log.warn("the chain journal ends in a damaged record; continuing from the last good one", {
      file,
      reason: damage,
      goodRecords: count,
      droppedBytes: bytes.length - good,
      keptAs: aside,
    });
    ftruncateSync(fd, good);
    fsyncSync(fd);
  }
  let open = true;
  return {
    append(record) {
      if (!open) throw new Error("the chain journal is closed");
      writeSync(fd, frame(record));
      fsyncSync(fd);
    },
    close() {
      if (!open) return;
      open = false;
      closeSync(fd);
    },
  };
}
