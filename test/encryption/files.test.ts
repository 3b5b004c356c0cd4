/**
 * Encrypted files end to end through the SDK (D20): what the gateway and the IPFS network hold is
 * age ciphertext (a second IPFS node fetching the Cid over bitswap gets ciphertext), the owner's
 * download decrypts byte-exact, so does a second client with nothing but the wallet key, Debian's
 * `age -d -i` opens the raw download with the exported identity, and the recipient is published on
 * the DID at the first encrypted upload only.
 */
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { connectEncryption } from "../../src/sdk/encryption.ts";
import { identityToRecipient } from "../../src/sdk/age.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { ageCli, ensureAgeCli } from "../support/age-cli.ts";
import { BASE } from "../support/storage.ts";
import { tempDir } from "../support/tmp.ts";
import { encryptionGateway } from "./support.ts";

setDefaultTimeout(60_000);

const env = await encryptionGateway();
const { gw } = env;
const PEER = join(import.meta.dir, "..", "support", "ipfs-peer.ts");
const AGE_INTRO = new TextEncoder().encode("age-encryption.org/v1\n");

const randomBytes = (n: number) => {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i += 65536) crypto.getRandomValues(out.subarray(i, Math.min(n, i + 65536)));
  return out;
};
const sha256 = (b: Uint8Array) => new Bun.CryptoHasher("sha256").update(b).digest("hex");
const bytesOf = (s: ReadableStream<Uint8Array>) => new Response(s).bytes();

/** A second IPFS node in its own process fetches `cid` from the gateway's node over bitswap. */
async function fetchFromPeer(cid: string): Promise<{ sha256?: string; bytes?: number; error?: string }> {
  const [addr] = (gw.backends.ipfs as unknown as { multiaddrs(): string[] }).multiaddrs();
  const child = Bun.spawn(["bun", PEER, addr as string, cid, "20000"], { stdout: "pipe", stderr: "pipe" });
  const [out] = await Promise.all([new Response(child.stdout).text(), child.exited]);
  return JSON.parse(out.trim().split("\n").at(-1) ?? "{}");
}

describe("an encrypted upload to ipfs", () => {
  // Four full 64 KiB chunks and a part: STREAM's chunk edges inside one file.
  const plain = randomBytes(4 * 65536 + 1234);
  let owner: Awaited<ReturnType<typeof env.user>>;
  let cid = "";
  let raw: Uint8Array = new Uint8Array(0);
  beforeAll(async () => {
    owner = await env.user();
    const entry = await owner.enc.upload("ipfs", new File([plain], "secret.bin"));
    cid = entry.Cid;
    expect(entry.UserDefined.encryption).toBe("age");
    // Cids and sizes are of the ciphertext (the hash pass and the upload pass sealed the same bytes,
    // or the signed SHA-256 would not have matched).
    expect(entry.Size).toBeGreaterThan(plain.length);
    raw = await bytesOf((await owner.enc.download("ipfs", cid, { raw: true })).body);
    expect(raw.length).toBe(entry.Size);
  });

  test("is age ciphertext on the IPFS network: a second node fetching its Cid over bitswap gets the ciphertext", async () => {
    expect(Buffer.from(raw.subarray(0, AGE_INTRO.length))).toEqual(Buffer.from(AGE_INTRO));
    const got = await fetchFromPeer(cid);
    expect(got.error).toBeUndefined();
    expect(got.sha256).toBe(sha256(raw));
    expect(got.sha256).not.toBe(sha256(plain));
  });

  test("the owner's download decrypts by itself, byte-exact", async () => {
    const opened = await owner.enc.download("ipfs", cid);
    expect(opened.encrypted).toBe(true);
    expect(opened.response.headers.get("x-stowage-encryption")).toBe("age");
    expect(sha256(await bytesOf(opened.body))).toBe(sha256(plain));
  });

  test("Debian's age -d -i with the exported identity decrypts the raw download", async () => {
    await ensureAgeCli();
    const keyFile = join(tempDir("age-key"), "key.txt");
    await Bun.write(keyFile, `${await owner.enc.identity()}\n`);
    const out = await ageCli(["-d", "-i", keyFile], raw);
    expect(sha256(out)).toBe(sha256(plain));
  });

  test("the same wallet key on a second machine (a fresh client, nothing kept) decrypts", async () => {
    const store = await connectStorage({ baseUrl: BASE, account: owner.account, fetch: gw.fetch });
    await store.login();
    const enc = await connectEncryption({ baseUrl: BASE, store, account: owner.account, fetch: gw.fetch });
    expect(sha256(await bytesOf((await enc.download("ipfs", cid)).body))).toBe(sha256(plain));
  });

  test("the recipient is published on the DID (did/pub/X25519/enc/base64) at the first upload, and not again", async () => {
    expect(await owner.enc.recipientOf(owner.address)).toBe(identityToRecipient(await owner.enc.identity()));
    const again = await owner.enc.publish();
    expect(again.tx).toBeUndefined();
    const before = await gw.chain.anvil.publicClient.getBlockNumber();
    await owner.enc.upload("dfs", new Uint8Array([1, 2, 3]), { name: "small" });
    expect(await gw.chain.anvil.publicClient.getBlockNumber()).toBe(before);
  });
});

test("dfs too, and the edges: an empty file and one of exactly one chunk round-trip", async () => {
  const u = await env.user();
  for (const size of [0, 65536, 65537]) {
    const plain = randomBytes(size);
    const entry = await u.enc.upload("dfs", plain, { name: `f${size}` });
    expect(entry.UserDefined.encryption).toBe("age");
    expect(sha256(await bytesOf((await u.enc.download("dfs", entry.Cid)).body))).toBe(sha256(plain));
  }
});

test("a plain upload is not touched by the decrypting download", async () => {
  const u = await env.user();
  const plain = randomBytes(1000);
  const entry = await u.store.upload("dfs", plain, { name: "plain" });
  const opened = await u.enc.download("dfs", entry.Cid);
  expect(opened.encrypted).toBe(false);
  expect(sha256(await bytesOf(opened.body))).toBe(sha256(plain));
});
