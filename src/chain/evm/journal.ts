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

/** Replays every good record through `apply` and opens the file for appending after the last
 * good one. An error thrown by `apply` is passed on, with the file untouched. */
export function openJournal(file: string, apply: (record: unknown) => void, log: Logger): Journal {
  const bytes = existsSync(file) ? readFileSync(file) : Buffer.alloc(0);
  let good = 0;
  let count = 0;
  let damage: string | undefined;
  while (good < bytes.length) {
    if (bytes.length - good < HEADER) {
      damage = "cut short";
      break;
    }
    const length = bytes.readUInt32BE(good);
    const end = good + HEADER + length;
    if (end > bytes.length) {
      damage = "cut short";
      break;
    }
    const payload = bytes.subarray(good + HEADER, end);
    if ((Bun.hash.crc32(payload) >>> 0) !== bytes.readUInt32BE(good + 4)) {
      damage = "checksum mismatch";
      break;
    }
    let record: unknown;
    try {
      record = JSON.parse(payload.toString("utf8"));
    } catch {
      damage = "not JSON";
      break;
    }
    // A record that passed its checksum is what was written: one that cannot be used (another
    // chain id, a newer format) stops the start and the file stays as it is.
    apply(record);
    good = end;
    count++;
  }
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
