/**
 * Sharing encrypted files (D20): the owner grants read on chain and writes a share (a new age
 * header wrapping the same file key to the reader's published recipient); the reader decrypts
 * with it, also with Debian's `age` (share + the stored payload); a stranger gets a clear error;
 * shares are keyed by owner, Mid and reader, and only the owner writes them; revoking removes both.
 */
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { EncryptionError } from "../../src/sdk/encryption.ts";
import { StorageApiError } from "../../src/sdk/storage.ts";
import { ageCli, ensureAgeCli } from "../support/age-cli.ts";
import { readJson } from "../support/app.ts";
import { tempDir } from "../support/tmp.ts";
import { encryptionGateway } from "./support.ts";

setDefaultTimeout(60_000);

const env = await encryptionGateway();
const { call } = env;
const sha256 = (b: Uint8Array) => new Bun.CryptoHasher("sha256").update(b).digest("hex");
const bytesOf = (s: ReadableStream<Uint8Array>) => new Response(s).bytes();
const plain = crypto.getRandomValues(new Uint8Array(150_000));

type User = Awaited<ReturnType<typeof env.user>>;
let owner: User;
let reader: User;
let stranger: User;
let cid = "";

beforeAll(async () => {
  [owner, reader, stranger] = await Promise.all([env.user(), env.user(), env.user()]);
  cid = (await owner.enc.upload("ipfs", plain, { name: "shared.bin" })).Cid;
  await reader.enc.publish();
});

describe("grant and share", () => {
  beforeAll(async () => {
    await owner.dir.publish({ cid, name: "shared.bin", size: plain.length });
    await owner.dir.grantRead(cid, reader.address);
    await owner.enc.share(cid, reader.address, "ipfs");
    await env.sync();
  });

  test("the grantee's download decrypts by itself, byte-exact", async () => {
    const opened = await reader.enc.download("ipfs", cid);
    expect(opened.encrypted).toBe(true);
    expect(sha256(await bytesOf(opened.body))).toBe(sha256(plain));
  });

  test("the share and the stored payload open with Debian's age and the reader's identity", async () => {
    await ensureAgeCli();
    const share = await readJson(await call("GET", `/v2/shares/${owner.address}/${cid}`, { token: reader.store.accessToken }));
    const raw = await bytesOf((await reader.enc.download("ipfs", cid, { raw: true })).body);
    // The file's own header ends at its MAC line; the share takes its place.
    const text = new TextDecoder("latin1").decode(raw.subarray(0, 4096));
    const headerEnd = text.indexOf("\n", text.indexOf("\n--- ") + 1) + 1;
    const keyFile = join(tempDir("age-key"), "reader.txt");
    await Bun.write(keyFile, `${await reader.enc.identity()}\n`);
    const out = await ageCli(["-d", "-i", keyFile], Buffer.concat([Buffer.from(share.data.header), raw.subarray(headerEnd)]));
    expect(sha256(out)).toBe(sha256(plain));
    // And the reader's identity alone does not open the file as stored.
    await expect(ageCli(["-d", "-i", keyFile], raw)).rejects.toThrow();
  });

  test("a stranger cannot read it: 403 from the gateway, and no share either", async () => {
    const err = await stranger.enc.download("ipfs", cid).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageApiError);
    expect((err as StorageApiError).status).toBe(403);
    const res = await call("GET", `/v2/shares/${owner.address}/${cid}`, { token: stranger.store.accessToken });
    expect(res.status).toBe(404);
    expect((await readJson(res)).message).toContain("has not shared");
  });

  test("granted on chain but no share: a clear error naming the fix", async () => {
    const other = await env.user();
    await other.enc.publish();
    await owner.dir.grantRead(cid, other.address);
    await env.sync();
    const err = (await other.enc.download("ipfs", cid).catch((e: unknown) => e)) as EncryptionError;
    expect(err).toBeInstanceOf(EncryptionError);
    expect(err.code).toBe("no_share");
    expect(err.message).toContain(`stowage grant ${cid} ${other.address}`);
  });
});

describe("the share routes", () => {
  const header = "age-encryption.org/v1\n-> X25519 abc\nAAAA\n--- " + "A".repeat(43) + "\n";

  test("writes go under the caller's own address: another account cannot touch the owner's shares", async () => {
    // The stranger writes "a share of cid for the reader": it is the stranger's, not the owner's.
    expect((await call("PUT", `/v2/shares/${cid}/${reader.address}`, { token: stranger.store.accessToken, body: { header } })).status).toBe(200);
    const mine = await readJson(await call("GET", `/v2/shares/${owner.address}/${cid}`, { token: reader.store.accessToken }));
    expect(mine.data.header).not.toBe(header);
    expect(mine.data.owner).toBe(owner.address);
    const theirs = await readJson(await call("GET", `/v2/shares/${stranger.address}/${cid}`, { token: reader.store.accessToken }));
    expect(theirs.data.header).toBe(header);
    // Deleting removes only the caller's own.
    expect((await readJson(await call("DELETE", `/v2/shares/${cid}/${reader.address}`, { token: stranger.store.accessToken }))).data.removed).toBe(true);
    expect((await call("GET", `/v2/shares/${owner.address}/${cid}`, { token: reader.store.accessToken })).status).toBe(200);
  });

  test("bad input is a 400 in the account model and stores nothing", async () => {
    const bad = async (path: string, body: unknown) => {
      const res = await call("PUT", path, { token: owner.store.accessToken, body });
      expect(res.status).toBe(400);
      expect((await readJson(res)).error).toBe("PARAM_ERROR");
    };
    await bad(`/v2/shares/${cid}/not-an-address`, { header });
    await bad(`/v2/shares/x/${stranger.address}`, { header });
    await bad(`/v2/shares/${cid}/${stranger.address}`, { header: "hello" });
    await bad(`/v2/shares/${cid}/${stranger.address}`, { header: "x".repeat(9000) });
    expect((await call("GET", `/v2/shares/${owner.address}/${cid}`, { token: stranger.store.accessToken })).status).toBe(404);
    expect((await call("PUT", `/v2/shares/${cid}/${stranger.address}`, { body: { header } })).status).toBe(401);
  });

  test("sharing with someone who published no recipient says so", async () => {
    const nobody = await env.user();
    const err = (await owner.enc.share(cid, nobody.address, "ipfs").catch((e: unknown) => e)) as EncryptionError;
    expect(err.code).toBe("no_recipient");
  });
});

test("revoking removes the share and the grant: the reader loses access (future access only)", async () => {
  const r = await env.user();
  await r.enc.publish();
  const file = (await owner.enc.upload("dfs", plain, { name: "revoked.bin" })).Cid;
  await owner.dir.publish({ cid: file, name: "revoked.bin", size: plain.length });
  await owner.dir.grantRead(file, r.address);
  await owner.enc.share(file, r.address, "dfs");
  await env.sync();
  expect(sha256(await bytesOf((await r.enc.download("dfs", file)).body))).toBe(sha256(plain));
  expect(await owner.enc.unshare(file, r.address)).toBe(true);
  expect(((await r.enc.download("dfs", file).catch((e: unknown) => e)) as EncryptionError).code).toBe("no_share");
  await owner.dir.revokeRead(file, r.address);
  await env.sync();
  expect(((await r.enc.download("dfs", file).catch((e: unknown) => e)) as StorageApiError).status).toBe(403);
});
