/**
 * The SDK's age v1 encryption (src/sdk/age.ts): round trips at the chunk boundaries,
 * interop with Debian's `age` CLI in both directions (the reference implementation: a file we write
 * must open there and one it writes must open here), and the tamperings decryption must refuse.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { AgeError, CHUNK_SIZE, decryptStream, encryptStream, generateIdentity, identityToRecipient } from "../../src/sdk/age.ts";
import { ageCli, ensureAgeCli } from "../support/age-cli.ts";
import { tempDir } from "../support/tmp.ts";

beforeAll(ensureAgeCli, 120_000);

const SIZES = [0, 1, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 1024 * 1024 + 17];

/** Deterministic, non-repeating bytes (a repeated pattern could hide a chunk mix-up). */
function data(size: number, seed = 1): Uint8Array {
  const out = new Uint8Array(size);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < size; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

/** A stream that hands out `bytes` in pieces of `piece` bytes, to cross chunk edges unevenly. */
function streamOf(bytes: Uint8Array, piece = 10_007): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (at >= bytes.length) return c.close();
      c.enqueue(bytes.slice(at, at + piece));
      at += piece;
    },
  });
}

const collect = (s: ReadableStream<Uint8Array>): Promise<Uint8Array> => new Response(s).bytes();
const encrypt = (recipients: string[], plain: Uint8Array) => collect(encryptStream(recipients, streamOf(plain)));
const decrypt = (identities: string[], sealed: Uint8Array) => collect(decryptStream(identities, streamOf(sealed)));

async function ageError(p: Promise<unknown>): Promise<AgeError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof AgeError) return e;
    throw e;
  }
  throw new Error("expected an AgeError, got success");
}

const identity = generateIdentity();
const recipient = identityToRecipient(identity);
const dir = tempDir("age");
const identityFile = join(dir, "key.txt");
writeFileSync(identityFile, `${identity}\n`);

test("keys have age-keygen's shapes", async () => {
  expect(identity).toMatch(/^AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}$/);
  expect(recipient).toMatch(/^age1[qpzry9x8gf2tvdw0s3jn54khce6mua7l]{58}$/);
  // age-keygen -y derives the same recipient from our identity.
  const proc = Bun.spawn(["age-keygen", "-y", identityFile], { stdout: "pipe" });
  expect((await new Response(proc.stdout).text()).trim()).toBe(recipient);
});

describe.each(SIZES)("%d bytes", (size) => {
  const plain = data(size, size + 7);

  test("round trip", async () => {
    const sealed = await encrypt([recipient], plain);
    // header, 16-byte nonce, then one 16-byte tag per chunk (an empty file still has one chunk).
    const chunks = Math.max(1, Math.ceil(size / CHUNK_SIZE));
    expect(sealed.length).toBeGreaterThan(size + 16 + 16 * chunks);
    expect(await decrypt([identity], sealed)).toEqual(plain);
  });

  test("ours opens with age -d", async () => {
    const sealed = await encrypt([recipient], plain);
    expect(await ageCli(["-d", "-i", identityFile], sealed)).toEqual(plain);
  });

  test("age -e opens with ours", async () => {
    const sealed = await ageCli(["-e", "-r", recipient], plain);
    expect(await decrypt([identity], sealed)).toEqual(plain);
  });
});

test("several recipients: each identity opens the file, the wrong one is told apart", async () => {
  const other = generateIdentity();
  const stranger = generateIdentity();
  const plain = data(1000);
  const sealed = await encrypt([identityToRecipient(other), recipient], plain);
  expect(await decrypt([identity], sealed)).toEqual(plain);
  expect(await decrypt([stranger, other], sealed)).toEqual(plain);
  expect(await ageCli(["-d", "-i", identityFile], sealed)).toEqual(plain);
  const e = await ageError(decrypt([stranger], sealed));
  expect(e.code).toBe("no_identity");
});

describe("tampering is refused", () => {
  const plain = data(2 * CHUNK_SIZE + 100, 3);
  let sealed: Uint8Array;
  let headerEnd: number; // index of the payload nonce
  beforeAll(async () => {
    sealed = await encrypt([recipient], plain);
    const text = new TextDecoder("latin1").decode(sealed);
    headerEnd = text.indexOf("\n", text.indexOf("\n---") + 1) + 1;
  });

  test("a flipped payload byte", async () => {
    const bad = sealed.slice();
    const at = headerEnd + 16 + CHUNK_SIZE + 40; // inside the second chunk
    bad[at] = (bad[at] as number) ^ 1;
    expect((await ageError(decrypt([identity], bad))).code).toBe("bad_chunk");
  });

  test("the last chunk cut off", async () => {
    const cut = sealed.slice(0, sealed.length - (100 + 16));
    expect((await ageError(decrypt([identity], cut))).code).toBe("truncated");
  });

  test("a final chunk cut short", async () => {
    expect((await ageError(decrypt([identity], sealed.slice(0, -1)))).code).toBe("bad_chunk");
  });

  test("the payload nonce cut", async () => {
    expect((await ageError(decrypt([identity], sealed.slice(0, headerEnd + 5)))).code).toBe("bad_header");
  });

  test("a changed header (MAC)", async () => {
    // A second, valid stanza for someone else: the header still parses and opens, only the MAC can tell.
    const text = new TextDecoder("latin1").decode(sealed.subarray(0, headerEnd));
    const other = await encrypt([identityToRecipient(generateIdentity())], new Uint8Array(0));
    const otherText = new TextDecoder("latin1").decode(other);
    const stanza = otherText.slice(otherText.indexOf("\n") + 1, otherText.indexOf("\n---") + 1);
    const forged = text.replace("\n---", `\n${stanza}---`);
    const bad = new Uint8Array([...new TextEncoder().encode(forged), ...sealed.subarray(headerEnd)]);
    expect((await ageError(decrypt([identity], bad))).code).toBe("bad_header_mac");
  });

  test("the wrong identity", async () => {
    expect((await ageError(decrypt([generateIdentity()], sealed))).code).toBe("no_identity");
  });

  test("data after the final chunk", async () => {
    // 64 KiB exactly: one full-size final chunk; anything after it must be refused.
    const full = await encrypt([recipient], data(CHUNK_SIZE, 9));
    expect(await decrypt([identity], full)).toEqual(data(CHUNK_SIZE, 9));
    const extra = new Uint8Array([...full, 0]);
    expect((await ageError(decrypt([identity], extra))).code).toBe("trailing_data");
    // a whole chunk-sized tail after it: the final flag sits in the middle
    const twice = new Uint8Array([...full, ...full.subarray(full.length - CHUNK_SIZE - 16)]);
    expect((await ageError(decrypt([identity], twice))).code).toBe("trailing_data");
  });

  test("not an age file", async () => {
    expect((await ageError(decrypt([identity], new TextEncoder().encode("hello\n")))).code).toBe("bad_header");
    expect((await ageError(decrypt([identity], new Uint8Array(0)))).code).toBe("bad_header");
  });

  test("a failed decryption releases its source", async () => {
    let cancelled: unknown = null;
    const source = new ReadableStream<Uint8Array>({
      pull: (c) => c.enqueue(new TextEncoder().encode("not age\n")),
      cancel: (reason) => {
        cancelled = reason;
      },
    });
    expect((await ageError(collect(decryptStream([identity], source)))).code).toBe("bad_header");
    expect(cancelled).toBeInstanceOf(AgeError);
  });

  test("an endless header line stops at the header bound", async () => {
    let pulled = 0;
    const endless = new ReadableStream<Uint8Array>({
      pull: (c) => {
        pulled += 4096;
        c.enqueue(new Uint8Array(4096).fill(0x61));
      },
    });
    expect((await ageError(collect(decryptStream([identity], endless)))).code).toBe("bad_header");
    expect(pulled).toBeLessThanOrEqual(64 * 1024 + 4096 * 2);
  });
});

test("sealing reads one 1 MiB piece (16 chunks) ahead at most, opening one chunk, not the whole input", async () => {
  // A source that counts what is pulled from it: 64 MiB on offer, the reader wants one chunk.
  const counting = (bytes: (at: number) => Uint8Array, total: number) => {
    const seen = { pulled: 0 };
    const stream = new ReadableStream<Uint8Array>({
      pull(c) {
        if (seen.pulled >= total) return c.close();
        const piece = bytes(seen.pulled);
        seen.pulled += piece.length;
        c.enqueue(piece);
      },
    }, { highWaterMark: 0 });
    return { stream, seen };
  };
  // The payload's AEAD seals and opens in place, so 16 chunks fill one piece of the output (fewer,
  // larger stream steps); the bound is that piece, whatever the input's size.
  const PIECE = 16 * CHUNK_SIZE;
  const src = counting(() => new Uint8Array(4096), 64 * 1024 * 1024);
  const out = encryptStream([recipient], src.stream).getReader();
  await out.read(); // header and nonce
  await out.read(); // the first piece
  expect(src.seen.pulled).toBeLessThanOrEqual(PIECE + 4096 * 2);
  await out.cancel();

  const plain = data(40 * CHUNK_SIZE, 5);
  const sealed = await encrypt([recipient], plain);
  const src2 = counting((at) => sealed.subarray(at, at + 4096), sealed.length);
  const plainOut = decryptStream([identity], src2.stream).getReader();
  // Opening hands out the input's own pieces, less the tags, as soon as the chunks in them are
  // open: the first comes after one chunk and a byte (the final flag's look-ahead), header and nonce.
  const first = await plainOut.read();
  expect(first.value?.length).toBeGreaterThan(0);
  expect(first.value).toEqual(plain.subarray(0, first.value?.length));
  expect(src2.seen.pulled).toBeLessThanOrEqual(1024 + CHUNK_SIZE + 16 + 1 + 4096);
  await plainOut.cancel();
});

test("bad keys are refused before any reading", () => {
  const s = streamOf(new Uint8Array(1));
  expect(() => encryptStream(["age1notakey"], s)).toThrow(AgeError);
  expect(() => encryptStream([identity], s)).toThrow(AgeError);
  expect(() => decryptStream([recipient], s)).toThrow(AgeError);
  expect(() => encryptStream([], s)).toThrow(AgeError);
});
