/**
 * The SDK's encrypted upload seals the file once: the signed hash must precede the
 * bytes (D5), so the upload reads its source twice, and it used to seal the plaintext in both
 * passes (the same bytes, at twice the cost). Now the one sealing goes into a spool (a temporary
 * file on Bun) that the upload reads as any file; the spool is gone after success and failure.
 * Without a spool (Node) the two passes still seal the same bytes. Seals are counted by wrapping
 * the payload's AEAD.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { nobleAead, payloadAead, usePayloadAead, type Aead } from "../../src/sdk/aead.ts";
import { connectEncryption } from "../../src/sdk/encryption.ts";
import { bunFileSpool, defaultSpool } from "../../src/sdk/spool.ts";
import { StorageApiError } from "../../src/sdk/storage.ts";
import { BASE } from "../support/storage.ts";
import { tempDir } from "../support/tmp.ts";
import { encryptionGateway } from "./support.ts";

setDefaultTimeout(60_000);

const env = await encryptionGateway();
const sha256 = (b: Uint8Array) => new Bun.CryptoHasher("sha256").update(b).digest("hex");
const bytesOf = (s: ReadableStream<Uint8Array>) => new Response(s).bytes();

let seals = 0;
let spooledMode = 0;
let previous: Aead;
beforeAll(async () => {
  previous = await payloadAead();
  const counting: Aead = { name: "counting", seal: (k, n, p) => (seals++, nobleAead.seal(k, n, p)), open: nobleAead.open };
  usePayloadAead(counting);
});
afterAll(() => usePayloadAead(previous));

// Five full 64 KiB STREAM chunks and a part: six seals for one pass.
const plain = crypto.getRandomValues(new Uint8Array(5 * 65536 + 777));
const CHUNKS = 6;

test("an encrypted upload seals each chunk once, through a private spool file that is gone afterwards; the download decrypts byte-exact", async () => {
  const u = await env.user();
  await u.enc.publish();
  const dir = tempDir("seal-once");
  const { enc } = await withSpool(u, dir);
  seals = 0;
  const entry = await enc.upload("dfs", plain, { name: "once.bin" });
  expect(seals).toBe(CHUNKS);
  expect(entry.UserDefined.encryption).toBe("age");
  expect(spooledMode & 0o777).toBe(0o600);
  expect(readdirSync(dir)).toEqual([]);
  expect(sha256(await bytesOf((await u.enc.download("dfs", entry.Cid)).body))).toBe(sha256(plain));
});

test("a refused encrypted upload leaves no spool file behind", async () => {
  const u = await env.user();
  await u.enc.publish();
  const dir = tempDir("seal-refused");
  const { enc } = await withSpool(u, dir);
  const err = await enc.upload("nosuchbackend", plain, { name: "x" }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(StorageApiError);
  expect(readdirSync(dir)).toEqual([]);
});

test("without a spool (as on Node) both passes seal, the same bytes, and the upload is accepted", async () => {
  const u = await env.user();
  await u.enc.publish();
  const enc = await connectEncryption({ baseUrl: BASE, store: u.store, account: u.account, fetch: env.fetch, spool: null });
  seals = 0;
  const entry = await enc.upload("dfs", plain, { name: "twice.bin" });
  expect(seals).toBe(2 * CHUNKS);
  expect(sha256(await bytesOf((await enc.download("dfs", entry.Cid)).body))).toBe(sha256(plain));
});

test("on Bun the default spool is a 0600 file in TMPDIR, removed by drop; its Blob reads back the bytes kept, as often as asked", async () => {
  const dir = tempDir("default-spool");
  const tmpdirBefore = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  try {
    const spool = defaultSpool();
    if (!spool) throw new Error("no default spool on Bun");
    const kept = crypto.getRandomValues(new Uint8Array(3 * 65536 + 5));
    const blob = await spool.keep(new Blob([kept]).stream());
    const files = readdirSync(dir);
    expect(files).toHaveLength(1);
    expect(statSync(join(dir, files[0] as string)).mode & 0o777).toBe(0o600);
    expect(blob.size).toBe(kept.length);
    // The upload reads it twice (hash pass, upload pass): both see the same bytes.
    expect(sha256(await blob.bytes())).toBe(sha256(kept));
    expect(sha256(await blob.bytes())).toBe(sha256(kept));
    await spool.drop();
    expect(readdirSync(dir)).toEqual([]);
  } finally {
    if (tmpdirBefore === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = tmpdirBefore;
  }
});

/** The user's encryption client with its spool in `dir`, noting the spool file's mode while it exists. */
async function withSpool(u: Awaited<ReturnType<typeof env.user>>, dir: string) {
  const spool = () => {
    const inner = bunFileSpool(dir);
    return {
      async keep(sealed: ReadableStream<Uint8Array>) {
        const blob = await inner.keep(sealed);
        const [name] = readdirSync(dir);
        spooledMode = statSync(`${dir}/${name}`).mode;
        return blob;
      },
      drop: inner.drop,
    };
  };
  return { enc: await connectEncryption({ baseUrl: BASE, store: u.store, account: u.account, fetch: env.fetch, spool }) };
}
