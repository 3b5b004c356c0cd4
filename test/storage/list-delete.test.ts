// listobjects (spec 4.1 row 8, section 2.5; D9 paging) and delete (row 6, rule 4, section 2.9;
// D9 failures with Status "Failure").
import { describe, expect, test } from "bun:test";
import { base58btc } from "multiformats/bases/base58";
import { CID } from "multiformats/cid";
import type { Address } from "viem";
import { directoryAccess, publicSql } from "../../src/directory/access.ts";
import { directoryState } from "../../src/directory/state.ts";
import { StorageApiError } from "../../src/sdk/storage.ts";
import { get, readJson } from "../support/app.ts";
import { testGateway } from "../support/storage.ts";

// Storage asks the directory as the server wires it (src/server.ts): `Public` in answers.
const gw = await testGateway({ extra: { publicCids: (owner, cids, q) => directoryAccess(gw.database.sql).publicCids(owner, cids, q), publicSql } });
const dfs = gw.backends.dfs as NonNullable<typeof gw.backends.dfs>;
const enc = new TextEncoder();
const unique = (label: string) => enc.encode(`${label} ${crypto.randomUUID()}`);
const dfsRefs = async (cid: string) => (await gw.database.sql.get<{ refs: number }>("SELECT refs FROM dfs_objects WHERE cid = $1", [cid]))?.refs;

async function failure(p: Promise<unknown>): Promise<StorageApiError> {
  const e = await p.then(() => undefined, (err: unknown) => err);
  expect(e).toBeInstanceOf(StorageApiError);
  return e as StorageApiError;
}

const bearer = (accessToken: string | undefined) => ({ authorization: `Bearer ${accessToken}` });

describe("listobjects", () => {
  test("answers { Address, Storage, Object } with only the caller's files of that back-end", async () => {
    const alice = await gw.user();
    const bob = await gw.user();
    const a1 = await alice.client.upload("dfs", unique("a1"), { name: "a1.txt" });
    const a2 = await alice.client.upload("ipfs", unique("a2"), { name: "a2.txt" });
    const a3 = await alice.client.upload("dfs", unique("a3"), { name: "a3.txt" });
    await bob.client.upload("dfs", unique("b1"), { name: "b1.txt" });
    const dfsList = await alice.client.list("dfs");
    expect(dfsList).toEqual({ Address: alice.account.address, Storage: "dfs", Object: [a1, a3] });
    expect(await alice.client.list("ipfs")).toEqual({ Address: alice.account.address, Storage: "ipfs", Object: [a2] });
    for (const f of dfsList.Object) {
      expect(Object.keys(f).sort()).toEqual(["Cid", "ID", "ModTime", "Name", "Public", "Size", "UserDefined"]);
      expect(f.UserDefined.etag).toBe(f.Cid);
    }
    // A user with no files yet gets an empty list, not an error.
    const carol = await gw.user();
    expect(await carol.client.list("ipfs")).toEqual({ Address: carol.account.address, Storage: "ipfs", Object: [] });
  });

  test("pages with limit and after (a file ID)", async () => {
    const { client } = await gw.user();
    const files = [];
    for (let i = 0; i < 5; i++) files.push(await client.upload("dfs", unique(`p${i}`), { name: `p${i}` }));
    const ids = files.map((f) => f.ID);
    expect((await client.list("dfs", { limit: 2 })).Object.map((f) => f.ID)).toEqual(ids.slice(0, 2));
    expect((await client.list("dfs", { limit: 2, after: ids[1] })).Object.map((f) => f.ID)).toEqual(ids.slice(2, 4));
    expect((await client.list("dfs", { limit: 2, after: ids[3] })).Object.map((f) => f.ID)).toEqual(ids.slice(4));
    expect((await client.list("dfs", { after: ids[4] })).Object).toEqual([]);
    expect((await client.list("dfs", { after: 0 })).Object.map((f) => f.ID)).toEqual(ids);
    expect((await client.list("dfs", { limit: 1000 })).Object).toHaveLength(5);
  });

  test("Public: the caller's own directory entry for the Cid is public, whatever other entries name it; paging alike", async () => {
    const state = directoryState(gw.chain.context.chain.id);
    let block = 1;
    // What the indexer writes for a Published or Unpublished log (src/directory/indexer.ts).
    const event = (owner: Address, mid: string, isPublic?: boolean) =>
      gw.database.sql.tx((tx) =>
        state.applyEvent(
          tx,
          isPublic === undefined
            ? { kind: "Unpublished", data: {}, owner, mid, block: block++, logIndex: 0, tx: "0x01" }
            : { kind: "Published", data: { name: "n", size: "1", price: "0", isPublic, keywords: [] }, owner, mid, block: block++, logIndex: 0, tx: "0x01" },
        ),
      );
    const alice = await gw.user();
    const bob = await gw.user();
    const twin = unique("twin");
    const t1 = await alice.client.upload("dfs", twin, { name: "t1" });
    const t2 = await alice.client.upload("dfs", twin, { name: "t2" }); // the same Cid twice
    const otherBytes = unique("other");
    const other = await alice.client.upload("dfs", otherBytes, { name: "other" });
    const plain = await alice.client.upload("dfs", unique("plain"), { name: "plain" });
    expect(t2.Cid).toBe(t1.Cid);
    // Alice names the twin's Cid in two entries (the Cid in two spellings): one private, one public.
    await event(alice.account.address, t1.Cid, false);
    await event(alice.account.address, CID.parse(t1.Cid).toString(base58btc), true);
    // `other`: Alice's entry is private; Bob's public entry for her Cid is not hers.
    await event(alice.account.address, other.Cid, false);
    await event(bob.account.address, other.Cid, true);
    const flags = async (page: { limit?: number; after?: number } = {}) => (await alice.client.list("dfs", page)).Object.map((f): [string, boolean] => [f.Name, f.Public]);
    const all: Array<[string, boolean]> = [["t1", true], ["t2", true], ["other", false], ["plain", false]];
    expect(await flags()).toEqual(all);
    expect(await flags({ limit: 1 })).toEqual(all.slice(0, 1));
    expect(await flags({ limit: 2, after: t1.ID })).toEqual(all.slice(1, 3));
    expect(await flags({ after: other.ID })).toEqual(all.slice(3));
    expect(plain.Public).toBe(false);
    // Bob's entry counts for Bob's own file of those bytes; his upload's answer says so too.
    const bobs = await bob.client.upload("dfs", otherBytes, { name: "bobs" });
    expect(bobs.Public).toBe(true);
    expect((await bob.client.list("dfs")).Object.map((f) => [f.Name, f.Public])).toEqual([["bobs", true]]);
    // Unpublishing the public spelling leaves only the private entry.
    await event(alice.account.address, CID.parse(t1.Cid).toString(base58btc));
    expect(await flags()).toEqual(all.map(([name]): [string, boolean] => [name, false]));
  });

  test("a bad limit or after → 400", async () => {
    const { client } = await gw.user();
    for (const q of ["limit=0", "limit=-1", "limit=1001", "limit=abc", "limit=1.5", "limit=", "after=-1", "after=x", "after=2.5"]) {
      const res = await gw.app.handle(get(`/dfs/listobjects?${q}`, { headers: bearer(client.accessToken) }));
      expect({ q, status: res.status }).toEqual({ q, status: 400 });
      expect(await readJson(res)).toMatchObject({ Code: "InvalidArgument", HTTPStatusCode: 400 });
    }
  });

  test("a failing catalog → 516 with the detail", async () => {
    const { client } = await gw.user();
    await gw.database.sql.run("ALTER TABLE files RENAME TO files_away");
    try {
      const e = await failure(client.list("dfs"));
      expect(e.status).toBe(516);
      expect(e.body).toMatchObject({ Code: "Storage", HTTPStatusCode: 516 });
      expect(e.body.Description).toMatch(/^list object error: .*files/);
    } finally {
      await gw.database.sql.run("ALTER TABLE files_away RENAME TO files");
    }
    expect((await client.list("dfs")).Object).toEqual([]);
  });
});

describe("delete", () => {
  test("answers { Status: 'Success' }; the file is gone and its space given back", async () => {
    const { client } = await gw.user();
    const bytes = crypto.getRandomValues(new Uint8Array(1_100_000));
    const entry = await client.upload("dfs", bytes, { name: "gone.bin" });
    const keep = await client.upload("dfs", unique("keep"), { name: "keep.txt" });
    const health = async () => (await dfs.health()) as { objects: number; chunks: number; bytes: number };
    const before = await health();
    expect(await client.delete(entry.ID)).toEqual({ Status: "Success" });
    expect((await client.list("dfs")).Object).toEqual([keep]);
    expect(await dfs.stat(entry.Cid)).toBeUndefined();
    const after = await health();
    expect({ objects: after.objects, chunks: after.chunks, bytes: after.bytes }).toEqual({ objects: before.objects - 1, chunks: before.chunks - 2, bytes: before.bytes - bytes.length });
    // Deleted once: the same id again is unknown.
    const again = await failure(client.delete(entry.ID));
    expect(again.status).toBe(404);
  });

  test("content another file still references stays until the last reference goes", async () => {
    const { client } = await gw.user();
    const bytes = unique("twice");
    const a = await client.upload("dfs", bytes, { name: "a" });
    const b = await client.upload("dfs", bytes, { name: "b" });
    expect(await dfsRefs(a.Cid)).toBe(2);
    await client.delete(a.ID);
    expect(await dfsRefs(a.Cid)).toBe(1);
    expect(await (await client.download("dfs", b.Cid)).text()).toBe(new TextDecoder().decode(bytes));
    await client.delete(b.ID);
    expect(await dfs.stat(a.Cid)).toBeUndefined();
  });

  test("another user's file → 403 with Status 'Failure', and the file stays", async () => {
    const alice = await gw.user();
    const mallory = await gw.user();
    const entry = await alice.client.upload("dfs", unique("mine"), { name: "mine.txt" });
    const e = await failure(mallory.client.delete(entry.ID));
    expect(e.status).toBe(403);
    expect(e.body).toEqual({ Status: "Failure", Code: "AccessDenied", Description: expect.any(String), HTTPStatusCode: 403 });
    expect((await alice.client.list("dfs")).Object).toEqual([entry]);
    expect(await dfs.stat(entry.Cid)).toBeDefined();
  });

  test("an unknown id → 404 with Status 'Failure'; an ipfs file's id on /dfs/delete is unknown there", async () => {
    const { client } = await gw.user();
    const onIpfs = await client.upload("ipfs", unique("ipfs"), { name: "i.txt" });
    for (const id of [999_999_999, onIpfs.ID]) {
      const e = await failure(client.delete(id));
      expect(e.status).toBe(404);
      expect(e.body).toEqual({ Status: "Failure", Code: "NotFound", Description: "File not found", HTTPStatusCode: 404 });
    }
    expect((await client.list("ipfs")).Object).toEqual([onIpfs]);
  });

  test("/ipfs/delete → 518 with Status 'Failure', and so does an unknown type", async () => {
    const { client } = await gw.user();
    const onIpfs = await client.upload("ipfs", unique("stay"), { name: "stay.txt" });
    for (const kind of ["ipfs", "s3"]) {
      const e = await failure(client.delete(onIpfs.ID, kind));
      expect(e.status).toBe(518);
      expect(e.body).toEqual({ Status: "Failure", Code: "Storage", Description: "Storage type not supported", HTTPStatusCode: 518 });
    }
    expect((await client.list("ipfs")).Object).toEqual([onIpfs]);
  });

  test("a bad token → 401 with Status 'Failure'", async () => {
    const { client } = await gw.user();
    const entry = await client.upload("dfs", unique("t"), { name: "t.txt" });
    for (const headers of [{}, { authorization: "Bearer nonsense" }] as Record<string, string>[]) {
      const res = await gw.app.handle(get(`/dfs/delete?id=${entry.ID}`, { headers }));
      expect(res.status).toBe(401);
      expect(await readJson(res)).toMatchObject({ Status: "Failure", Code: "Authentication", HTTPStatusCode: 401 });
    }
    expect((await client.list("dfs")).Object).toEqual([entry]);
  });

  test("missing signed parameters → 401 with Status 'Failure'", async () => {
    const { client } = await gw.user();
    const entry = await client.upload("dfs", unique("u"), { name: "u.txt" });
    const res = await gw.app.handle(get(`/dfs/delete?id=${entry.ID}`, { headers: bearer(client.accessToken) }));
    expect(res.status).toBe(401);
    expect(await readJson(res)).toMatchObject({ Status: "Failure", Code: "Authentication", Description: "Missing parameter" });
    expect((await client.list("dfs")).Object).toEqual([entry]);
  });
});
