// GET /traffichash (spec 4.1 row 3, 5.7; D4, D6, D22): the EIP-712 digest of a traffic voucher for
// one file, which a client can recompute before signing, and the payer's all-time counter; and a
// voucher's claim.
import { describe, expect, test } from "bun:test";
import { hashTypedData } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { get, readJson } from "../support/app.ts";
import { testGateway } from "../support/storage.ts";

const gw = await testGateway({ ipfs: false });

/** The voucher digest as D4 and D22 define it, computed here independently of the server's code. */
const expectedHash = (size: bigint, cid: string, expires = 0n) =>
  hashTypedData({
    domain: { name: "Stowage", version: "1", chainId: 985, verifyingContract: gw.chain.context.contracts.proxy },
    types: {
      Voucher: [
        { name: "seller", type: "address" },
        { name: "size", type: "uint256" },
        { name: "cid", type: "string" },
        { name: "expires", type: "uint64" },
      ],
    },
    primaryType: "Voucher",
    message: { seller: gw.chain.operator.address, size, cid, expires },
  });

const CID = "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4";

const hashOf = (accessToken: string | undefined, query: string) =>
  gw.app.handle(get(`/traffichash${query}`, { headers: { authorization: `Bearer ${accessToken}`, "content-type": "multipart/form-data" } }));

describe("GET /traffichash", () => {
  test("needs the Bearer token", async () => {
    const res = await gw.app.handle(get("/traffichash?size=100"));
    expect(res.status).toBe(401);
    expect(await readJson(res)).toEqual({ Code: "Authentication", Description: "Token is null", HTTPStatusCode: 401 });
  });

  test("with a cid: answers hash, cid, expires, seller, size, chainId, verifyingContract, used and remaining; hash = hashTypedData of the D4 domain and Voucher type", async () => {
    const { client } = await gw.user();
    for (const [size, expires] of [[0n, 0n], [1n, 1_900_000_000n], [123_456_789n, 0n], [9_007_199_254_740_991n, 18_446_744_073_709_551_615n]] as const) {
      const res = await hashOf(client.accessToken, `?size=${size}&cid=${CID}${expires ? `&expires=${expires}` : ""}`);
      expect(res.status).toBe(200);
      expect(await readJson(res)).toEqual({
        hash: expectedHash(size, CID, expires),
        cid: CID,
        expires: String(expires),
        seller: gw.chain.operator.address,
        size: String(size),
        chainId: 985,
        verifyingContract: gw.chain.context.contracts.proxy,
        used: "0",
        remaining: String(size),
      });
    }
  });

  test("the Cid is hashed in its canonical form (CIDv1, base32), which the answer echoes", async () => {
    const { client } = await gw.user();
    const v0 = "QmPZ9gcCEpqKTo6aq61g2nXGUhM4iCL3ewB6LDXZCtioEB";
    const v1 = "bafybeiasb5vpmaounyilfuxbd3lryvosl4yefqrfahsb2esg46q6tu6y5q";
    const answer = await readJson(await hashOf(client.accessToken, `?size=10&cid=${v0}`));
    expect(answer).toMatchObject({ cid: v1, hash: expectedHash(10n, v1) });
  });

  test("without a cid (a client that follows the spec's size alone): the counter, and no hash, for a voucher always names its file", async () => {
    const { client } = await gw.user();
    const res = await hashOf(client.accessToken, "?size=100");
    expect(res.status).toBe(200);
    expect(await readJson(res)).toEqual({
      seller: gw.chain.operator.address,
      size: "100",
      chainId: 985,
      verifyingContract: gw.chain.context.contracts.proxy,
      used: "0",
      remaining: "100",
    });
  });

  test("used grows by exactly the bytes moved (uploads and downloads); remaining = size − used, never below 0", async () => {
    const { client } = await gw.user();
    const bytes = crypto.getRandomValues(new Uint8Array(70_000));
    const entry = await client.upload("dfs", bytes, { name: "v.bin" });
    expect((await client.trafficHash(100_000)).used).toBe("70000");
    await (await client.download("dfs", entry.Cid, { range: [0, 999] })).arrayBuffer();
    await (await client.download("dfs", entry.Cid, { size: bytes.length })).arrayBuffer();
    // A HEAD charges nothing.
    await client.sizeOf("dfs", entry.Cid);
    const answer = await client.trafficHash(200_000);
    expect(answer).toMatchObject({ used: String(70_000 + 1000 + 70_000), remaining: String(200_000 - 141_000) });
    expect((await client.trafficHash(5)).remaining).toBe("0");
  });

  test("a voucher is the raw signature of the answered hash: signing it directly pays for a download", async () => {
    const { account, client } = await gw.user();
    const entry = await client.upload("dfs", new TextEncoder().encode("signed from the hash"), { name: "h.txt" });
    const { hash, used } = await client.trafficHash(0, { cid: entry.Cid });
    const size = BigInt(used) + 20n;
    const answer = await client.trafficHash(size, { cid: entry.Cid });
    expect(answer.hash).toBe(expectedHash(size, entry.Cid));
    // A private-key account signs a bare digest (LocalAccount types `sign` as optional).
    const sign = await (account.sign as NonNullable<typeof account.sign>)({ hash: answer.hash as `0x${string}` });
    expect(hash).not.toBe(answer.hash);
    const res = await gw.app.handle(get(`/dfs/${entry.Cid}?size=${size}&sign=${sign}`));
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("signed from the hash");
  });

  test("a missing or malformed size, cid or expires → 400", async () => {
    const { client } = await gw.user();
    const bad = ["", "?size=", "?size=abc", "?size=-1", "?size=1.5", "?size=99999999999999999999", `?size=1&cid=not-a-cid`, `?size=1&cid=${CID}&expires=-1`, `?size=1&cid=${CID}&expires=soon`, `?size=1&cid=${CID}&expires=18446744073709551616`];
    for (const q of bad) {
      const res = await hashOf(client.accessToken, q);
      expect({ q, status: res.status }).toEqual({ q, status: 400 });
      expect(await readJson(res)).toMatchObject({ Code: "InvalidArgument", HTTPStatusCode: 400 });
    }
  });

  test("the counter belongs to the payer: one user's traffic does not show in another's", async () => {
    const alice = await gw.user();
    const bob = await gw.user();
    await alice.client.upload("dfs", new Uint8Array(5000), { name: "zeros" });
    expect((await alice.client.trafficHash(0)).used).toBe("5000");
    expect((await bob.client.trafficHash(0)).used).toBe("0");
  });
});

describe("a voucher's claim (D6)", () => {
  // A claim in a transaction of its own, as a download's or an upload's commit makes it.
  const accept = (v: { payer: `0x${string}`; size: number }, needs?: number) => gw.database.sql.tx((tx) => gw.storage!.vouchers.claim(tx, v, needs), { isolation: "read committed" });
  // The claim reads the payer's count in its own statement and checks the allowance on
  // its answer: a refusal there must roll the claim back, or the voucher would be spent unused.
  test("a claim counts from the payer's count; a short voucher is refused and stays unspent; a used one is refused as used, or as short when it is both", async () => {
    const vouchers = gw.storage!.vouchers;
    const payer = privateKeyToAccount(generatePrivateKey()).address;
    const claims = (size: number) => gw.database.sql.all<{ base: number }>("SELECT base FROM vouchers_used WHERE payer = $1 AND size = $2", [payer, size]);
    await vouchers.settle({ payer, size: 0, allowance: 0 }, 1000);
    expect((await accept({ payer, size: 5000 })).allowance).toBe(4000);
    expect(await claims(5000)).toEqual([{ base: 1000 }]);
    await expect(accept({ payer, size: 500 })).rejects.toThrow("the voucher covers up to 500 bytes in all; 1000 are used");
    expect(await claims(500)).toEqual([]);
    await expect(accept({ payer, size: 5000 })).rejects.toThrow("this voucher was already used");
    await vouchers.settle({ payer, size: 0, allowance: 0 }, 5000);
    await expect(accept({ payer, size: 5000 })).rejects.toThrow("the voucher covers up to 5000 bytes in all; 6000 are used");
    // Short by 1000 bytes for a transfer that needs them, though not spent: refused, unspent.
    await expect(accept({ payer, size: 7000 }, 2000)).rejects.toThrow("this transfer needs 2000");
    expect(await claims(7000)).toEqual([]);
    expect((await accept({ payer, size: 7000 }, 1000)).allowance).toBe(1000);
  });

  // An upload peeks at its voucher before its body and claims it where it records the file
  // (storage/service.ts): the allowance it streamed with must be the one it is accepted with.
  test("a peek claims nothing and refuses as a claim would; a peeked voucher is claimed with the count the peek read, once", async () => {
    const vouchers = gw.storage!.vouchers;
    const payer = privateKeyToAccount(generatePrivateKey()).address;
    const claims = (size: number) => gw.database.sql.all<{ base: number }>("SELECT base FROM vouchers_used WHERE payer = $1 AND size = $2", [payer, size]);
    await vouchers.settle({ payer, size: 0, allowance: 0 }, 1000);
    const peeked = await vouchers.peek({ payer, size: 5000 });
    expect(peeked).toMatchObject({ allowance: 4000, base: 1000 });
    expect(await claims(5000)).toEqual([]);
    await expect(vouchers.peek({ payer, size: 500 })).rejects.toThrow("the voucher covers up to 500 bytes in all; 1000 are used");
    await expect(vouchers.peek({ payer, size: 5000 }, 4001)).rejects.toThrow("this transfer needs 4001");
    // The payer's other transfers count meanwhile: not taken from the peeked allowance.
    await vouchers.settle({ payer, size: 0, allowance: 0 }, 2000);
    const claim = () => gw.database.sql.tx((tx) => vouchers.claimPeeked(tx, peeked));
    expect((await claim()).allowance).toBe(4000);
    expect(await claims(5000)).toEqual([{ base: 1000 }]);
    await expect(claim()).rejects.toThrow("this voucher was already used");
    await expect(vouchers.peek({ payer, size: 5000 })).rejects.toThrow("this voucher was already used");
    // Both used and short: refused as short, as `claim` refuses it.
    await vouchers.settle({ payer, size: 0, allowance: 0 }, 2500);
    await expect(vouchers.peek({ payer, size: 5000 })).rejects.toThrow("the voucher covers up to 5000 bytes in all; 5500 are used");
  });
});
