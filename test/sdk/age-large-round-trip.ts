/**
 * The measured part of age-large.test.ts, in a process of its own so that no other test's memory
 * shares its RSS. It takes the SDK's encrypted upload path without the network: TOTAL generated
 * bytes are sealed once into the spool (the SDK's own temporary-file spool), the spool is hashed
 * (the hash pass), then read again and decrypted as it streams (what the upload sends and a
 * download opens). It prints one JSON line: sizes, whether the plaintext came back byte-exact and
 * both spool reads hashed alike, RSS growth, seconds.
 *
 *   bun test/sdk/age-large-round-trip.ts <MiB> [wasm|native]
 */
import { tmpdir } from "node:os";
import { payloadAead } from "../../src/sdk/aead.ts";
import { useNativeAead } from "../../src/sdk/aead-native.ts";
import { decryptStream, generateIdentity, identityToRecipient, prepareEncryption } from "../../src/sdk/age.ts";
import { bunFileSpool } from "../../src/sdk/spool.ts";

const MiB = 2 ** 20;
const TOTAL = Number(process.argv[2] ?? 256) * MiB + 12_345;
if (process.argv[3] === "native" && !useNativeAead()) throw new Error("no native AEAD (OpenSSL or libsodium) loads");
// Seven random MiB in turn (seven: no multiple of a 1 MiB batch of chunks lines up with it), so a
// chunk put back in the wrong place changes the plaintext's hash.
const blocks = Array.from({ length: 7 }, () => {
  const b = new Uint8Array(MiB);
  for (let i = 0; i < MiB; i += 65536) crypto.getRandomValues(b.subarray(i, i + 65536));
  return b;
});
const started = performance.now();

/** TOTAL bytes of the blocks in turn, made as they are read (the same bytes each time). */
function source(): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream<Uint8Array>(
    {
      pull(c) {
        if (sent >= TOTAL) return c.close();
        const n = Math.min(MiB, TOTAL - sent);
        c.enqueue((blocks[(sent / MiB) % 7] as Uint8Array).slice(0, n));
        sent += n;
      },
    },
    { highWaterMark: 0 },
  );
}
const hashOf = async (s: ReadableStream<Uint8Array>) => {
  const h = new Bun.CryptoHasher("sha256");
  let n = 0;
  for await (const c of s) {
    h.update(c);
    n += c.length;
  }
  return { hash: h.digest("hex"), bytes: n };
};

const identity = generateIdentity();
const sealer = prepareEncryption([identityToRecipient(identity)]);
const plain = await hashOf(source());
// The payload's AEAD loads once per process (libsodium's WASM, ≈ 15 MiB): not per-file memory.
const aead = (await payloadAead()).name;
Bun.gc(true);
const before = process.memoryUsage().rss;
let peak = before;
const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 25);

const spool = bunFileSpool(tmpdir());
try {
  const sealed = await spool.keep(sealer.encrypt(source()));
  const hashPass = await hashOf(sealed.stream());
  let uploadPass = "";
  const h = new Bun.CryptoHasher("sha256");
  const tee = sealed.stream().pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, c) {
        h.update(chunk);
        c.enqueue(chunk);
      },
      flush() {
        uploadPass = h.digest("hex");
      },
    }),
  );
  // In place, as enc.download opens a fetch body: the pieces are this stream's alone once hashed.
  const opened = await hashOf(decryptStream([identity], tee, { inPlace: true }));
  clearInterval(timer);
  peak = Math.max(peak, process.memoryUsage().rss);
  console.log(
    JSON.stringify({
      aead,
      total: TOTAL,
      sealedBytes: hashPass.bytes,
      expectedSealed: sealer.sealedSize(TOTAL),
      plainBytes: opened.bytes,
      byteExact: opened.hash === plain.hash,
      sameCiphertext: uploadPass === hashPass.hash,
      grewMiB: (peak - before) / MiB,
      seconds: (performance.now() - started) / 1000,
    }),
  );
} finally {
  clearInterval(timer);
  await spool.drop();
}
