/**
 * Opening age's payload where it arrived (src/sdk/age.ts `decryptStream(…, { inPlace: true })`,
 * what `enc.download` does with a fetch body): every chunk is decrypted inside the
 * input's own pieces, or gathered into one buffer and written back when it straddles them. This
 * checks the sizes at the chunk edges under every piece layout that matters (each chunk inside one
 * piece, every chunk straddling, pieces smaller than a chunk, one piece for the whole file) with
 * each payload AEAD; that the output is made of the input's bytes (nothing copied) in place and
 * that the input is left alone otherwise; and that tampering gets the same errors, with the same
 * authentic prefix released, as decrypting a copy.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { usePayloadAead } from "../../src/sdk/aead.ts";
import { AgeError, CHUNK_SIZE, decryptStream, encryptStream, generateIdentity, identityToRecipient } from "../../src/sdk/age.ts";
import { openssl, payloadAeads, sodium } from "./payload-aeads.ts";

const SEALED_CHUNK = CHUNK_SIZE + 16;
const identity = generateIdentity();
const recipient = identityToRecipient(identity);
const SIZES = [0, 1, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 3 * 1024 * 1024 + 5];

const plainOf = (size: number) => {
  const out = new Uint8Array(size);
  for (let at = 0; at < size; at += 65_536) crypto.getRandomValues(out.subarray(at, at + 65_536));
  return out;
};
const collect = (s: ReadableStream<Uint8Array>) => new Response(s).bytes();

/** The input as a list of pieces, each its own buffer (as fetch hands them out). `headerEnd`:
 * where the payload nonce begins, so a layout can put piece edges on chunk edges. */
type Layout = (sealed: Uint8Array, headerEnd: number) => Uint8Array[];
const every = (n: number): Layout => (sealed) => {
  const out: Uint8Array[] = [];
  for (let at = 0; at < sealed.length; at += n) out.push(sealed.slice(at, at + n));
  return out;
};
const LAYOUTS: [string, Layout][] = [
  ["each chunk inside its own piece", (sealed, headerEnd) => [sealed.slice(0, headerEnd + 16), ...every(SEALED_CHUNK)(sealed.subarray(headerEnd + 16), 0)]],
  ["every chunk straddling 64 KiB pieces", every(65_536)],
  ["pieces smaller than a chunk (4,099 bytes)", every(4_099)],
  ["one piece for the whole file", (sealed) => [sealed.slice()]],
  ["1 MiB pieces", every(1024 * 1024)],
];

const streamOf = (pieces: Uint8Array[]) => {
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      const next = pieces[i++];
      if (next) c.enqueue(next);
      else c.close();
    },
  });
};
const headerEndOf = (sealed: Uint8Array) => {
  const text = new TextDecoder("latin1").decode(sealed.subarray(0, 4096));
  return text.indexOf("\n", text.indexOf("\n---") + 1) + 1;
};

/** What a decryption hands out before its error (or all of it), and the error's code. */
async function outcome(s: ReadableStream<Uint8Array>): Promise<{ out: Uint8Array[]; code?: string }> {
  const out: Uint8Array[] = [];
  try {
    for await (const piece of s) out.push(piece);
    return { out };
  } catch (e) {
    if (!(e instanceof AgeError)) throw e;
    return { out, code: e.code };
  }
}
const joined = (parts: Uint8Array[]) => Buffer.concat(parts);

afterAll(() => usePayloadAead("libsodium"));

test("the system's libsodium and OpenSSL are there: the native paths are tested, not skipped (scripts/age.sh installs libsodium)", () => {
  expect([sodium?.name, openssl?.name]).toEqual(["libsodium-native", "openssl-native"]);
});

for (const [label, use] of payloadAeads) {
  describe(`in place with ${label}`, () => {
    for (const size of SIZES) {
      test(`${size} bytes: byte-exact under every piece layout; the output is the input's own bytes`, async () => {
        use();
        const plain = plainOf(size);
        const sealed = await collect(encryptStream([recipient], new Blob([plain]).stream()));
        const headerEnd = headerEndOf(sealed);
        for (const [name, layout] of LAYOUTS) {
          const pieces = layout(sealed, headerEnd);
          const { out, code } = await outcome(decryptStream([identity], streamOf(pieces), { inPlace: true }));
          expect([name, code]).toEqual([name, undefined]);
          expect([name, Buffer.compare(joined(out), plain)]).toEqual([name, 0]);
          // Nothing copied out: every piece handed out is a view of one the input gave.
          const buffers = new Set(pieces.map((p) => p.buffer));
          expect([name, out.every((o) => buffers.has(o.buffer as ArrayBuffer))]).toEqual([name, true]);
          // Copying (the default) leaves the input as it was.
          const kept = layout(sealed, headerEnd);
          expect([name, Buffer.compare(await collect(decryptStream([identity], streamOf(kept))), plain)]).toEqual([name, 0]);
          expect([name, Buffer.compare(joined(kept), sealed)]).toEqual([name, 0]);
        }
      }, 60_000);
    }

    test("tampering: the same error and the same authentic prefix as decrypting a copy, under every layout", async () => {
      use();
      const plain = plainOf(5 * CHUNK_SIZE + 100);
      const sealed = await collect(encryptStream([recipient], new Blob([plain]).stream()));
      const payload = headerEndOf(sealed) + 16;
      const flipped = sealed.slice();
      flipped[payload + 2 * SEALED_CHUNK + 7] = (flipped[payload + 2 * SEALED_CHUNK + 7] as number) ^ 1; // inside chunk 2
      // A full-size final chunk, then a byte: only the byte after it tells it was marked final.
      const whole = await collect(encryptStream([recipient], new Blob([plain.subarray(0, 5 * CHUNK_SIZE)]).stream()));
      const trailing = new Uint8Array(whole.length + 1);
      trailing.set(whole);
      const cases: [string, Uint8Array, string, number][] = [
        ["a flipped byte in chunk 2", flipped, "bad_chunk", 2 * CHUNK_SIZE],
        ["cut at a chunk edge", sealed.slice(0, payload + 5 * SEALED_CHUNK), "truncated", 5 * CHUNK_SIZE],
        ["cut inside the last chunk", sealed.slice(0, -1), "bad_chunk", 5 * CHUNK_SIZE],
        ["a byte after a full final chunk", trailing, "trailing_data", 5 * CHUNK_SIZE],
      ];
      for (const [what, bytes, code, released] of cases) {
        const headerEnd = headerEndOf(bytes);
        for (const [name, layout] of LAYOUTS) {
          const inPlace = await outcome(decryptStream([identity], streamOf(layout(bytes, headerEnd)), { inPlace: true }));
          const copied = await outcome(decryptStream([identity], streamOf(layout(bytes, headerEnd))));
          expect([what, name, inPlace.code, copied.code]).toEqual([what, name, code, code]);
          expect([what, name, joined(inPlace.out).length]).toEqual([what, name, released]);
          expect(Buffer.compare(joined(inPlace.out), plain.subarray(0, released))).toBe(0);
          expect(Buffer.compare(joined(copied.out), plain.subarray(0, released))).toBe(0);
        }
      }
    }, 60_000);
  });
}
