/**
 * Three compiled gateways as one service (DESIGN.md D16): one PostgreSQL, one Ceph RGW,
 * one external anvil with our contracts, and the settings an operator shares between gateways
 * (database URL, bucket and prefix, chain RPC and contracts, JWT key, operator key). A client may
 * land on any gateway for any call — a load balancer's round robin — so each test moves one SDK
 * client between gateways with a routing `fetch`, and checks what a user relies on: a session,
 * files, quota, vouchers, login limits and the directory are the cluster's, not a gateway's; a
 * gateway killed with SIGKILL (mid-upload, or while it runs the indexer) costs nothing but itself.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { SQL } from "bun";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { runChain } from "../../src/cli/chain.ts";
import { readDeployment } from "../../src/chain/deployment.ts";
import { connectGateway } from "../../src/sdk/chain.ts";
import { connectDirectory, type SearchResult } from "../../src/sdk/directory.ts";
import { connectStorage, type StorageClient } from "../../src/sdk/storage.ts";
import { startAnvil } from "../support/anvil.ts";
import { statusOf } from "../support/app.ts";
import { runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { cephRgw, stowageS3Env } from "../support/ceph.ts";
import { postgres } from "../support/postgres.ts";
import { tempDir } from "../support/tmp.ts";
import { until } from "../support/until.ts";

const POLL_MS = 200;
const hex32 = () => `0x${randomBytes(32).toString("hex")}`;

// ---- the shared parts: chain, database, object store, secrets

const anvil = await startAnvil();
const adminKey = generatePrivateKey();
const operatorKey = generatePrivateKey();
await anvil.fund(privateKeyToAccount(adminKey).address, parseEther("100"));
await anvil.fund(privateKeyToAccount(operatorKey).address, parseEther("100"));
const deployDir = tempDir("cluster-deploy");
// The deploy names the operator the Proxy accepts purchases from: the gateways' shared key.
const deployEnv = { STOWAGE_DATA_DIR: deployDir, STOWAGE_CHAIN_RPC: anvil.url, STOWAGE_ADMIN_KEY: adminKey, STOWAGE_OPERATOR_KEY: operatorKey };
if ((await runChain(["deploy"], deployEnv, () => {}, () => {})) !== 0) throw new Error("stowage chain deploy failed");
const deployment = readDeployment(deployDir)!;
/** The chain and its contracts, as every gateway and the operator's command line are told them. */
const chainEnv: Record<string, string> = {
  STOWAGE_CHAIN_RPC: anvil.url,
  STOWAGE_PROXY_ADDRESS: deployment.contracts.proxy,
  STOWAGE_DID_REGISTRY_ADDRESS: deployment.contracts.didRegistry,
  STOWAGE_DIRECTORY_ADDRESS: deployment.contracts.directory,
  STOWAGE_CONTRACTS_BLOCK: String(deployment.block),
};

const pg = await postgres();
const databaseUrl = await pg.createDatabase();
const db = new SQL(databaseUrl, { max: 2 });
const rgw = await cephRgw();

const shared: Record<string, string> = {
  ...chainEnv,
  STOWAGE_CHAIN_CONFIRMATIONS: "0",
  STOWAGE_INDEXER_POLL: `${POLL_MS}ms`,
  // anvil mines each transaction at once: a receipt polled for every 2 s (an external chain's
  // default) was only waiting, 2 s of the purchase test's 2.2.
  STOWAGE_CHAIN_POLL: "25ms",
  STOWAGE_DATABASE_URL: databaseUrl,
  ...stowageS3Env(rgw, rgw.prefix()),
  STOWAGE_JWT_KEY: hex32(),
  STOWAGE_OPERATOR_KEY: operatorKey,
};

// ---- the gateways

interface Gateway {
  name: string;
  dataDir: string;
  bin: RunningBinary;
  url: string;
}

const gateways: Gateway[] = [];
afterAll(async () => {
  await Promise.all(gateways.map((g) => g.bin.stop("SIGKILL").catch(() => {})));
  await db.close();
  await anvil.stop();
});

/** The libp2p addresses a gateway logged at start. */
function ipfsAddrs(g: Gateway): string[] {
  for (const line of g.bin.output().split("\n")) {
    if (!line.includes('"ipfs node ready"')) continue;
    return (JSON.parse(line) as { addresses: string[] }).addresses;
  }
  throw new Error(`${g.name} logged no ipfs addresses:\n${g.bin.output()}`);
}

async function start(name: string, dataDir = join(tempDir(`cluster-${name}`), "data")): Promise<Gateway> {
  // Each gateway dials the ones already running (a dialled gateway sees the connection too).
  const peers = gateways.filter((g) => g.name !== name).flatMap(ipfsAddrs);
  const bin = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir], { ...shared, STOWAGE_IPFS_PEERS: peers.join(",") }, 60_000);
  const g = { name, dataDir, bin, url: bin.url };
  const at = gateways.findIndex((x) => x.name === name);
  if (at >= 0) gateways[at] = g;
  else gateways.push(g);
  return g;
}

const [A, B, C] = [await start("A"), await start("B"), await start("C")] as [Gateway, Gateway, Gateway];
const gw = (name: string) => gateways.find((g) => g.name === name)!;

/** `stowage admin …` against the shared chain, as an operator runs it from anywhere. */
async function admin(...args: string[]) {
  const r = await runBinary(["admin", ...args], { ...deployEnv, ...chainEnv });
  if (r.code !== 0) throw new Error(`stowage admin ${args.join(" ")} failed: ${r.stderr}`);
}

const didOf = (a: PrivateKeyAccount) => `did:ethr:0x3d9:${a.address}`;

/** A user with gas, and (when asked) space and traffic granted on chain. */
async function user(o: { space?: string; traffic?: string } = {}) {
  const account = privateKeyToAccount(generatePrivateKey());
  await anvil.fund(account.address, parseEther("1"));
  if (o.space) await admin("grant", "--did", didOf(account), "--space", o.space);
  if (o.traffic) await admin("grant", "--did", didOf(account), "--traffic", o.traffic);
  return account;
}

/**
 * A load balancer in front of the cluster, as a `fetch`: every request goes to the gateway chosen
 * last (`via`), whatever origin the client had in mind. `sent` keeps the URLs it forwarded.
 */
function balancer() {
  let target = A.url;
  const sent: string[] = [];
  const route = (input: string | URL | Request) => {
    const u = new URL(input instanceof Request ? input.url : String(input));
    const t = new URL(target);
    u.protocol = t.protocol;
    u.host = t.host;
    return u;
  };
  const f = ((input: string | URL | Request, init?: RequestInit) => {
    const u = route(input);
    sent.push(u.href);
    return fetch(input instanceof Request ? new Request(u.href, input) : u.href, init);
  }) as typeof fetch;
  return {
    fetch: f,
    sent,
    via(g: Gateway) {
      target = g.url;
    },
  };
}

const bytesOf = async (res: Response) => new Uint8Array(await res.arrayBuffer());

/** Log lines of each gateway a failing test prints: CI shows the last 60 lines before a failure. */
const LOG_TAIL = 12;

/**
 * A test of the cluster that, when it fails, prints each gateway's last log lines before its
 * error: the gateways' side of a failure (a refused transaction, a slow receipt) is otherwise
 * lost with their processes.
 */
function clusterTest(name: string, fn: () => Promise<void>, timeoutMs: number) {
  test(
    name,
    async () => {
      try {
        await fn();
      } catch (err) {
        for (const g of gateways) console.error(`--- gateway ${g.name}, last log lines:\n${g.bin.output().trimEnd().split("\n").slice(-LOG_TAIL).join("\n")}`);
        throw err;
      }
    },
    timeoutMs,
  );
}

describe("three gateways, one service", () => {
  clusterTest("log in at A, restricted calls at B (one requestID window); upload at A and B, list at B, download at C, delete at B", async () => {
    const account = await user({ space: "16MiB", traffic: "64MiB" });
    const lb = balancer();
    const store = await connectStorage({ baseUrl: A.url, account, fetch: lb.fetch });
    lb.via(A);
    await store.login();

    const one = new Uint8Array(randomBytes(3 * 1024 * 1024 + 5));
    const two = new Uint8Array(randomBytes(200_000));
    lb.via(B);
    const fileOne = await store.upload("dfs", one, { name: "one.bin" });
    lb.via(A);
    const fileTwo = await store.upload("ipfs", two, { name: "two.bin" });

    lb.via(B);
    expect((await store.list("dfs")).Object.map((f) => f.Name)).toEqual(["one.bin"]);
    expect((await store.list("ipfs")).Object.map((f) => f.Name)).toEqual(["two.bin"]);
    lb.via(C);
    expect(await bytesOf(await store.download("dfs", fileOne.Cid, { size: one.length }))).toEqual(one);
    expect(await bytesOf(await store.download("ipfs", fileTwo.Cid, { size: two.length }))).toEqual(two);

    // Every gateway serves every block of the shared store over bitswap: an outside IPFS node that
    // dials C alone fetches the ipfs file uploaded at A.
    const peer = Bun.spawn(["bun", join(import.meta.dir, "..", "support", "ipfs-peer.ts"), ipfsAddrs(C).find((a) => a.includes("/tcp/"))!, fileTwo.Cid], { stdout: "pipe", stderr: "pipe" });
    const fetched = JSON.parse((await new Response(peer.stdout).text()).trim()) as { sha256?: string; bytes?: number; ms?: number; error?: string };
    expect(fetched).toEqual({ sha256: new Bun.CryptoHasher("sha256").update(two).digest("hex"), bytes: two.length, ms: expect.any(Number) });

    lb.via(B);
    await store.delete(fileOne.ID);
    const deleteUrl = lb.sent.findLast((u) => u.includes("/dfs/delete"))!;
    // The same signed request (same requestID) replayed at another gateway is refused.
    const replay = await fetch(deleteUrl.replace(new URL(B.url).host, new URL(C.url).host), { headers: { authorization: `Bearer ${store.accessToken}` } });
    expect(replay.status).toBe(401);
    expect(((await replay.json()) as { Description: string }).Description).toMatch(/requestID already used/);
    lb.via(A);
    expect((await store.list("dfs")).Object).toEqual([]);
    expect((await store.space()).SizeByte).toBe(16 * 1024 * 1024 - two.length);
  }, 120_000);

  clusterTest("a voucher used at A is refused at C", async () => {
    const account = await user({ space: "1MiB", traffic: "1MiB" });
    const store = await connectStorage({ baseUrl: A.url, account });
    await store.login();
    const file = await store.upload("dfs", new TextEncoder().encode("twenty bytes of text"), { name: "v.txt" });
    const { used } = await store.trafficHash(0);
    const size = BigInt(used) + 20n;
    const { hash } = await store.trafficHash(size, { cid: file.Cid });
    const sign = await account.sign({ hash: hash as NonNullable<typeof hash> });
    const atA = await fetch(`${A.url}/dfs/${file.Cid}?size=${size}&sign=${sign}`);
    expect(atA.status).toBe(200);
    expect(await atA.text()).toBe("twenty bytes of text");
    const atC = await fetch(`${C.url}/dfs/${file.Cid}?size=${size}&sign=${sign}`);
    expect(atC.status).toBe(402);
    expect(((await atC.json()) as { Description: string }).Description).toMatch(/sign a new one/);
  }, 60_000);

  clusterTest("50 parallel uploads spread over the three gateways never exceed one small quota", async () => {
    const SPACE = 100_000;
    const SIZE = 4_000;
    const account = await user({ space: String(SPACE), traffic: "16MiB" });
    // Three devices of one user, one per gateway, each with its own session.
    const stores: StorageClient[] = [];
    for (const g of [A, B, C]) {
      const s = await connectStorage({ baseUrl: g.url, account });
      await s.login();
      stores.push(s);
    }
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => statusOf(stores[i % 3]!.upload("dfs", new Uint8Array(randomBytes(SIZE)), { name: `p${i}.bin` }))),
    );
    const ok = results.filter((s) => s === 200).length;
    expect(results.every((s) => s === 200 || s === 402)).toBe(true);
    expect(ok).toBeGreaterThan(0);
    expect(ok * SIZE).toBeLessThanOrEqual(SPACE);
    for (const s of stores) {
      const listed = (await s.list("dfs", { limit: 100 })).Object;
      expect(listed.length).toBe(ok);
      expect(await s.space()).toMatchObject({ SizeByte: SPACE - ok * SIZE });
    }
  }, 120_000);

  clusterTest("purchases at the three gateways at once all go through (operator nonces from the database)", async () => {
    const buyers = await Promise.all([A, B, C, A, B, C].map(() => user()));
    const stores = await Promise.all(
      buyers.map(async (account, i) => {
        const s = await connectStorage({ baseUrl: [A, B, C][i % 3]!.url, account });
        await s.login();
        return s;
      }),
    );
    for (const [i, account] of buyers.entries()) await (await connectGateway([A, B, C][i % 3]!.url, { account })).deposit(parseEther("0.001"));
    const bought = await Promise.all(stores.map((s) => s.buySpace({ size: 10_000 })));
    expect(new Set(bought.map((b) => b.tx)).size).toBe(6);
    for (const s of stores) expect((await s.space()).SizeByte).toBe(10_000);
  }, 120_000);

  clusterTest("a file published through the SDK is found by /challenge at every gateway", async () => {
    const account = await user({ space: "1MiB", traffic: "1MiB" });
    const store = await connectStorage({ baseUrl: B.url, account });
    await store.login();
    const file = await store.upload("dfs", new Uint8Array(randomBytes(50_000)), { name: "atlas.bin" });
    const dir = await connectDirectory(B.url, { account });
    await dir.publish({ cid: file.Cid, name: "Cluster atlas", size: file.Size, price: 0n, keywords: ["cartography"] });
    for (const g of [A, B, C]) {
      const d = await connectDirectory(g.url, { account });
      const hits = await until(`search at ${g.name}`, () => d.search("cartograph"), (h: SearchResult[]) => h.length > 0, 15_000);
      expect(hits.map((h) => h.Mid)).toEqual([file.Cid]);
    }
  }, 60_000);

  clusterTest("kill -9 of the indexing gateway: another one indexes within 10 s", async () => {
    const holder = async () => ((await db`SELECT holder FROM leases WHERE name = 'indexer'`) as { holder: string }[])[0]?.holder;
    const first = await until("an indexer lease", holder, (h) => h !== undefined, 15_000);
    // Each gateway logs its lease holder id at start.
    const victim = gateways.find((g) => g.bin.output().includes(first!))!;
    expect(victim).toBeDefined();
    await victim.bin.stop("SIGKILL");
    const killedAt = Date.now();

    const account = await user({ space: "1MiB", traffic: "1MiB" });
    const alive = gateways.find((g) => g !== victim)!;
    const store = await connectStorage({ baseUrl: alive.url, account });
    await store.login();
    const file = await store.upload("dfs", new Uint8Array(randomBytes(10_000)), { name: "after.bin" });
    await (await connectDirectory(alive.url, { account })).publish({ cid: file.Cid, name: "Indexed after a death", size: file.Size, price: 0n, keywords: ["phoenix"] });
    const d = await connectDirectory(alive.url, { account });
    await until("search after the indexer died", () => d.search("phoenix"), (h: SearchResult[]) => h.length > 0, 10_000);
    expect(Date.now() - killedAt).toBeLessThan(10_000);
    const next = await holder();
    expect(next).not.toBe(first);
    // Back to three for the tests that follow.
    await start(victim.name, victim.dataDir);
  }, 90_000);

  clusterTest("kill -9 of A mid-upload: B and C keep serving, nothing partial appears", async () => {
    const account = await user({ space: "64MiB", traffic: "64MiB" });
    const a = gw("A");
    const kept = await connectStorage({ baseUrl: gw("B").url, account });
    await kept.login();
    const whole = new Uint8Array(randomBytes(100_000));
    const keptFile = await kept.upload("dfs", whole, { name: "kept.bin" });
    const before = await kept.space();

    // An upload to A that stalls after 4 MiB of its 16 MiB body; A dies while it waits.
    let reached!: () => void;
    const halfway = new Promise<void>((ok) => (reached = ok));
    const stalling = ((input: string | URL | Request, init?: RequestInit) => {
      if (!(init?.body instanceof ReadableStream)) return fetch(input, init);
      const reader = init.body.getReader();
      let sent = 0;
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          if (sent >= 4 * 1024 * 1024) {
            reached();
            return new Promise<void>(() => {}); // never more: the connection dies with A
          }
          const next = await reader.read();
          if (next.done) return controller.close();
          sent += next.value.byteLength;
          controller.enqueue(next.value);
        },
      });
      return fetch(input, { ...init, body, duplex: "half" } as RequestInit);
    }) as typeof fetch;
    const dying = await connectStorage({ baseUrl: a.url, account, fetch: stalling });
    await dying.login();
    const upload = dying.upload("dfs", new Uint8Array(randomBytes(16 * 1024 * 1024)), { name: "partial.bin" }).then(
      () => "stored",
      () => "failed",
    );
    await halfway;
    await a.bin.stop("SIGKILL");
    expect(await upload).toBe("failed");

    for (const g of [gw("B"), gw("C")]) {
      const s = await connectStorage({ baseUrl: g.url, account });
      await s.login();
      expect((await s.list("dfs")).Object.map((f) => f.Name)).toEqual(["kept.bin"]);
      expect(await bytesOf(await s.download("dfs", keptFile.Cid, { size: whole.length }))).toEqual(whole);
    }
    // The dead upload's hold on the space lapses; nothing of it is ever counted as stored.
    const s = await connectStorage({ baseUrl: gw("C").url, account });
    await s.login();
    await until("the dead upload's hold to lapse", () => s.space(), (q) => q.FreeByte === before.FreeByte, 40_000);
    await start("A", a.dataDir);
  }, 120_000);

  clusterTest("login rate limits hold across gateways", async () => {
    const did = didOf(privateKeyToAccount(generatePrivateKey()));
    const attempt = (g: Gateway) =>
      fetch(`${g.url}/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ did, token: "00", timestamp: 1, signature: "0x00" }) });
    // One gateway alone allows 60 a minute; three together must not allow 180.
    let first429 = 0;
    for (let i = 1; i <= 62 && first429 === 0; i++) {
      const res = await attempt(gateways[i % 3]!);
      if (res.status === 429) first429 = i;
      else expect(res.status).toBe(401);
    }
    expect(first429).toBeGreaterThan(0);
    expect(first429).toBeLessThanOrEqual(61);
    for (const g of gateways) expect((await attempt(g)).status).toBe(429);
  }, 60_000);
});
