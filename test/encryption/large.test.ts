/**
 * A large encrypted round trip in flat memory (D20: "memory does not grow with the file"): 256 MiB
 * generated on the fly are sealed (the upload's way: prepareEncryption, the same ciphertext twice,
 * hashed once and decrypted once), and the process's memory grows by far less than the file. A
 * buffering implementation holds the whole file (≥ 256 MiB) and fails this.
 */
import { expect, test } from "bun:test";
import { identityToRecipient, generateIdentity, prepareEncryption, decryptStream } from "../../src/sdk/age.ts";

const MiB = 2 ** 20;
const TOTAL = 256 * MiB + 12_345;

const block = crypto.getRandomValues(new Uint8Array(MiB));

/** TOTAL bytes of a repeating random block, made as they are read (the same bytes each time). */
function source(): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream<Uint8Array>(
    {
      pull(c) {
        if (sent >= TOTAL) return c.close();
        const n = Math.min(block.length, TOTAL - sent);
        c.enqueue(block.slice(0, n));
        sent += n;
      },
    },
    { highWaterMark: 0 },
  );
}

test("256 MiB sealed, hashed and decrypted as streams: the same ciphertext twice, memory flat", async () => {
  const identity = generateIdentity();
  const sealed = prepareEncryption([identityToRecipient(identity)]);
  Bun.gc(true);
  const before = process.memoryUsage().rss;
  let peak = before;
  const sample = () => {
    peak = Math.max(peak, process.memoryUsage().rss);
  };

  // The hash pass.
  const hasher = new Bun.CryptoHasher("sha256");
  let sealedBytes = 0;
  for await (const chunk of sealed.encrypt(source())) {
    hasher.update(chunk);
    sealedBytes += chunk.length;
    if ((sealedBytes & (16 * MiB - 1)) < chunk.length) sample();
  }
  expect(sealedBytes).toBe(sealed.sealedSize(TOTAL));

  // The upload pass, decrypted on the way: it authenticates every chunk, and hashes the same.
  const again = new Bun.CryptoHasher("sha256");
  const tee = sealed.encrypt(source()).pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, c) {
        again.update(chunk);
        c.enqueue(chunk);
      },
    }),
  );
  let plainBytes = 0;
  for await (const chunk of decryptStream([identity], tee)) {
    plainBytes += chunk.length;
    if ((plainBytes & (16 * MiB - 1)) < chunk.length) sample();
  }
  expect(plainBytes).toBe(TOTAL);
  expect(again.digest("hex")).toBe(hasher.digest("hex"));
  const grewMiB = (peak - before) / MiB;
  console.log(`rss grew ${grewMiB.toFixed(1)} MiB over a ${(TOTAL / MiB).toFixed(0)} MiB round trip`);
  expect(grewMiB).toBeLessThan(64);
}, 300_000);
