/**
 * A whole gateway with the trustless gateway (D17) wired in as the server wires it, on real parts:
 * anvil with our contracts, the database of this pass (SQLite or PostgreSQL), the blob store of
 * this pass (local or Ceph RGW), dfs and Helia, the directory and its indexer, quota enforcement
 * with the chain's records, and the app behind the real HTTP listener (so clients such as
 * verified-fetch reach it over a socket, and client addresses are real).
 */
import type { PrivateKeyAccount } from "viem/accounts";
import { buildApp } from "../../src/app.ts";
import { openBlobStore } from "../../src/blob/index.ts";
import { createGateway } from "../../src/gateway/service.ts";
import { createHandler } from "../../src/http/handler.ts";
import { listen } from "../../src/http/listen.ts";
import { silentLogger } from "../../src/log.ts";
import { afterAll } from "bun:test";
import { connectDirectory } from "../../src/sdk/directory.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { appFetch } from "../support/app.ts";
import { BASE, testGateway } from "../support/storage.ts";
import { granter } from "../quota/grants.ts";
import { CID } from "multiformats/cid";
import { importTree } from "../support/car.ts";
import type { Denylist } from "../../src/denylist/index.ts";
import type { Sql } from "../../src/db/sql.ts";
import { servableBlocks } from "../../src/storage/start.ts";
import type { SiteOrigin } from "../../src/gateway/site.ts";
import { blockKey } from "../../src/storage/ipfs/blocks.ts";
import { addRef } from "../../src/storage/ipfs/pins.ts";
import { createFiles } from "../../src/storage/files.ts";
import { canonicalDid } from "../../src/identity/did.ts";

export const GiB = 1024 ** 3;

export async function trustlessGateway() {
  // The denylist a test turns on (`useDenylist`), made once the database exists: storage, S3,
  // bitswap and the gateways ask it through these late-bound calls, as the server wires the real one.
  const late: { denylist?: Denylist; sql?: Sql } = {};
  const denylist: Pick<Denylist, "check" | "refuseUpload" | "servable" | "blocking"> = {
    check: (cid, door, path) => late.denylist?.check(cid, door, path),
    refuseUpload: (cid, door) => late.denylist?.refuseUpload(cid, door),
    servable: async (cid, door, roots) => (late.denylist ? late.denylist.servable(cid, door, roots) : true),
    blocking: (cid, path) => late.denylist?.blocking(cid, path),
  };
  const gw = await testGateway({
    quota: true,
    denylist,
    servable: (cid) => (late.denylist && late.sql ? servableBlocks(late.sql, late.denylist)(cid) : Promise.resolve(true)),
  });
  const sql = gw.database.sql;
  late.sql = sql;
  /** Turns the denylist on for everything this gateway serves (undefined: off again). */
  const useDenylist = (d: Denylist | undefined) => void (late.denylist = d);
  const { directory, indexer } = gw;
  // A second handle on the same blob store, as another gateway of the cluster would hold (D15).
  const store = await openBlobStore(gw.config);
  const grant = granter(gw.chain);

  /** An app over this gateway's services whose trustless gateway has these limits, behind a
   * listener on 127.0.0.1 that trusts one proxy (tests name client addresses in X-Forwarded-For). */
  async function serve(o: { allowance?: number; perClient?: number; now?: () => number; site?: SiteOrigin } = {}) {
    /** Every request the listener answered: its path and status. */
    const answered: { path: string; status: number }[] = [];
    /** Bytes the gateway reported sent (what the server's metrics count). */
    const sent = { bytes: 0 };
    const gateway = createGateway({ sql, store, allowance: o.allowance ?? GiB, perClient: o.perClient ?? 0, log: silentLogger, now: o.now, site: o.site, denylist, onSent: (n) => void (sent.bytes += n) });
    const app = buildApp({ config: gw.config, log: gw.log, health: {}, chain: gw.chain.context, accounts: gw.accounts, storage: gw.storage, directory, quota: gw.quota, gateway });
    const listener = await listen({
      hostname: "127.0.0.1",
      port: 0,
      maxRequestBodySize: gw.config.maxBody,
      fetch: createHandler({ handle: (r) => app.handle(r), log: silentLogger, corsOrigins: [], trustProxy: 1, observe: (r, status) => answered.push({ path: new URL(r.url).pathname, status }) }),
      error: () => new Response("internal error", { status: 500 }),
    });
    afterAll(() => listener.stop(true));
    return { app, gateway, answered, sent, url: `http://127.0.0.1:${listener.port}` };
  }

  /** A funded user with quota, logged in to storage, with a directory client. */
  async function user(account?: PrivateKeyAccount) {
    const acct = account ?? (await gw.chain.anvil.newAccount());
    await grant(acct.address, "space", 64 * 1024 * 1024);
    await grant(acct.address, "traffic", 64 * 1024 * 1024);
    const fetch = appFetch(gw.app);
    const store = await connectStorage({ baseUrl: BASE, account: acct, fetch });
    await store.login();
    const dir = await connectDirectory(BASE, { account: acct, fetch });
    return { account: acct, address: acct.address, store, dir };
  }

  /** Uploads `bytes` to ipfs and publishes the file as `opts` say; the index has caught up on return. */
  async function publish(owner: Awaited<ReturnType<typeof user>>, bytes: Uint8Array, o: { name?: string; isPublic?: boolean; price?: number } = {}) {
    const file = await owner.store.upload("ipfs", bytes, { name: o.name ?? "file.bin" });
    await owner.dir.publish({ cid: file.Cid, name: o.name ?? "file.bin", size: file.Size, isPublic: o.isPublic ?? true, price: o.price ?? 0 });
    await indexer.syncOnce();
    return file;
  }

  /**
   * A tree of files stored on ipfs as one root, as an import of a whole tree (a CAR) stores it:
   * its blocks in the blob store, pinned and indexed under the root, a file row of `owner`'s
   * naming the root; published as `opts` say. `shardAbove` makes its directories HAMT-sharded
   * past that many bytes of links. Returns the root's Cid.
   */
  async function publishTree(owner: Awaited<ReturnType<typeof user>>, files: { path: string; content: Uint8Array }[], o: { name?: string; isPublic?: boolean; price?: number; shardAbove?: number } = {}) {
    const { root, blocks } = await importTree(files, o);
    return publishBlocks(owner, root, blocks, files.reduce((n, f) => n + f.content.byteLength, 0), o);
  }

  /** Stores `blocks` (any DAG, crafted ones too) as `owner`'s file of the root `root`, published
   * as `o` says, as publishTree does. */
  async function publishBlocks(owner: Awaited<ReturnType<typeof user>>, root: CID, blocks: readonly { cid: CID; bytes: Uint8Array }[], size: number, o: { name?: string; isPublic?: boolean; price?: number } = {}) {
    const sizes = new Map<string, number>();
    // A few at a time: over S3 each put is a round trip.
    for (let i = 0; i < blocks.length; i += 16) {
      await Promise.all(blocks.slice(i, i + 16).map(({ cid, bytes }) => gw.blobs.store.put(blockKey(cid), bytes)));
    }
    for (const { cid, bytes } of blocks) sizes.set(blockKey(cid), bytes.byteLength);
    const cid = root.toString();
    await addRef(sql, cid, size, sizes);
    await createFiles(sql).add({ did: canonicalDid(owner.address, gw.config.chainId), backend: "ipfs", name: o.name ?? "tree", cid, size, encryption: "" });
    await owner.dir.publish({ cid, name: o.name ?? "tree", size, isPublic: o.isPublic ?? true, price: o.price ?? 0 });
    await indexer.syncOnce();
    return root;
  }

  return { gw, sql, store, directory, indexer, serve, user, publish, publishTree, publishBlocks, useDenylist, sync: () => indexer.syncOnce() };
}

/** Random bytes (incompressible, so no two tests' blocks coincide). */
export function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let at = 0; at < n; at += 65_536) crypto.getRandomValues(out.subarray(at, Math.min(n, at + 65_536)));
  return out;
}
