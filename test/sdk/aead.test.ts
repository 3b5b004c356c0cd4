/**
 * The payload's AEAD (src/sdk/aead.ts): libsodium's WASM where it loads, @noble's otherwise, and
 * the two write the same age files, so a file sealed by either opens with the other (and with
 * Debian's `age`, which test/sdk/age.test.ts checks against whichever runs); the system's
 * libsodium through FFI, which the command line prefers, writes them too, and Debian's age reads them.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { nobleAead, payloadAead, usePayloadAead } from "../../src/sdk/aead.ts";
import { nativeAead, opensslAead, sodiumAead } from "../../src/sdk/aead-native.ts";
import { AgeError, decryptStream, encryptStream, generateIdentity, identityToRecipient, prepareEncryption } from "../../src/sdk/age.ts";
import { ageCli, ensureAgeCli } from "../support/age-cli.ts";
import { tempDir } from "../support/tmp.ts";

afterAll(() => usePayloadAead("libsodium"));

const bytes = (stream: ReadableStream<Uint8Array>) => new Response(stream).bytes();

test("libsodium's WASM loads here and seals and opens in place (its heap, not the wrappers' copies)", async () => {
  // Pinned: in one `bun test` process, the command line's tests make the native library the payload's.
  usePayloadAead("libsodium");
  const aead = await payloadAead();
  expect(aead.name).toBe("libsodium");
  expect(typeof aead.sealInto).toBe("function");
  expect(typeof aead.openInPlace).toBe("function");
});

test("a forged chunk is refused by both (null, not a throw)", async () => {
  const key = crypto.getRandomValues(new Uint8Array(32));
  const nonce = new Uint8Array(12);
  const sealed = nobleAead.seal(key, nonce, new Uint8Array(100));
  sealed[3] = (sealed[3] as number) ^ 1;
  expect(nobleAead.open(key, nonce, sealed)).toBeNull();
  expect((await payloadAead()).open(key, nonce, sealed)).toBeNull();
});

test("the same prepared encryption gives the same bytes under either; each opens the other's", async () => {
  const identity = generateIdentity();
  // Several chunks and a partial last one: every nonce (counter, final flag) is exercised.
  const plain = crypto.getRandomValues(new Uint8Array(3 * 65536 + 1234));
  const sealed = prepareEncryption([identityToRecipient(identity)]);
  usePayloadAead("libsodium");
  const bySodium = await bytes(sealed.encrypt(new Blob([plain]).stream()));
  usePayloadAead("noble");
  const byNoble = await bytes(sealed.encrypt(new Blob([plain]).stream()));
  expect(Buffer.compare(bySodium, byNoble)).toBe(0);
  expect(Buffer.compare(await bytes(decryptStream([identity], new Blob([bySodium]).stream())), plain)).toBe(0);
  usePayloadAead("libsodium");
  expect(Buffer.compare(await bytes(decryptStream([identity], new Blob([byNoble]).stream())), plain)).toBe(0);
});

test("the native AEAD is OpenSSL's where both libraries load: it opens ≈ 2.5× as fast as libsodium here (bench/README.md)", () => {
  expect(opensslAead()).toBeDefined();
  expect(nativeAead()).toBe(opensslAead() as NonNullable<ReturnType<typeof opensslAead>>);
});

const LIBRARIES = [
  ["the system's libsodium", sodiumAead, "libsodium-native"],
  ["the system's OpenSSL (libcrypto)", opensslAead, "openssl-native"],
] as const;

for (const [library, load, name] of LIBRARIES) describe(`${library} through Bun's FFI (aead-native.ts: the command line's payload AEAD where it loads)`, () => {
  // scripts/age.sh installs Debian's libsodium23 with age, and libssl3 is Debian's own: the fast
  // paths are tested, never skipped.
  let native: ReturnType<typeof nativeAead>;
  beforeAll(async () => {
    await ensureAgeCli();
    native = load();
  }, 120_000);
  // 40 full chunks and a part: more than two of the 16-chunk pieces it seals into one buffer.
  const plain = crypto.getRandomValues(new Uint8Array(40 * 65536 + 4321));
  const uneven = (b: Uint8Array, piece = 10_007) => {
    let at = 0;
    return new ReadableStream<Uint8Array>({
      pull(c) {
        if (at >= b.length) return c.close();
        c.enqueue(b.slice(at, at + piece));
        at += piece;
      },
    });
  };

  test("loads here and agrees with @noble: same bytes across batch edges, each opens the other's, forgeries refused", async () => {
    expect(native?.name).toBe(name);
    const aead = native as NonNullable<typeof native>;
    const identity = generateIdentity();
    const sealed = prepareEncryption([identityToRecipient(identity)]);
    usePayloadAead(aead);
    const byNative = await bytes(sealed.encrypt(uneven(plain)));
    usePayloadAead("noble");
    const byNoble = await bytes(sealed.encrypt(uneven(plain)));
    expect(Buffer.compare(byNative, byNoble)).toBe(0);
    usePayloadAead(aead);
    expect(Buffer.compare(await bytes(decryptStream([identity], uneven(byNoble, 65_000))), plain)).toBe(0);
    const key = crypto.getRandomValues(new Uint8Array(32));
    const nonce = new Uint8Array(12);
    const forged = aead.seal(key, nonce, new Uint8Array(0));
    expect(aead.open(key, nonce, forged)).toEqual(new Uint8Array(0));
    forged[0] = (forged[0] as number) ^ 1;
    expect(aead.open(key, nonce, forged)).toBeNull();
  });

  test("Debian's age opens what it seals (an empty file too), and it opens what age seals", async () => {
    usePayloadAead(native as NonNullable<typeof native>);
    const identity = generateIdentity();
    const keyFile = join(tempDir("aead-native"), "key.txt");
    await Bun.write(keyFile, `${identity}\n`);
    for (const p of [plain, new Uint8Array(0)]) {
      const sealed = await bytes(encryptStream([identityToRecipient(identity)], uneven(p)));
      expect(Buffer.compare(await ageCli(["-d", "-i", keyFile], sealed), p)).toBe(0);
    }
    const byAge = await ageCli(["-e", "-r", identityToRecipient(identity)], plain);
    expect(Buffer.compare(await bytes(decryptStream([identity], uneven(byAge))), plain)).toBe(0);
  }, 60_000);

  test("opening in place still refuses what age must: a flipped byte, a cut, a final chunk with data after it", async () => {
    usePayloadAead(native as NonNullable<typeof native>);
    const identity = generateIdentity();
    const sealed = await bytes(encryptStream([identityToRecipient(identity)], uneven(plain)));
    const codeOf = async (b: Uint8Array) => {
      try {
        await bytes(decryptStream([identity], uneven(b, 30_011)));
        return "opened";
      } catch (e) {
        return e instanceof AgeError ? e.code : String(e);
      }
    };
    const flipped = sealed.slice();
    const mid = sealed.length - 20 * 65552;
    flipped[mid] = (flipped[mid] as number) ^ 1;
    expect(await codeOf(flipped)).toBe("bad_chunk");
    // Cut at a chunk edge: the last full chunk is not marked final.
    expect(await codeOf(sealed.subarray(0, sealed.length - 4337))).toBe("truncated");
    // One whole file's worth of chunks, then a byte more: the final chunk is followed by data.
    const small = await bytes(encryptStream([identityToRecipient(identity)], uneven(plain.subarray(0, 3 * 65536))));
    const trailing = new Uint8Array(small.length + 1);
    trailing.set(small);
    expect(await codeOf(trailing)).toBe("trailing_data");
    expect(await codeOf(sealed)).toBe("opened");
  });

  test("sealing reads one 16-chunk piece ahead at most, not the whole input", async () => {
    usePayloadAead(native as NonNullable<typeof native>);
    let pulled = 0;
    const source = new ReadableStream<Uint8Array>({
      pull(c) {
        pulled += 4096;
        c.enqueue(new Uint8Array(4096));
      },
    }, { highWaterMark: 0 });
    const out = encryptStream([identityToRecipient(generateIdentity())], source).getReader();
    await out.read(); // header and nonce
    await out.read(); // the first piece
    expect(pulled).toBeLessThanOrEqual(16 * 65536 + 4096 * 2);
    await out.cancel();
  });
});
