/**
 * The file directory end to end, against the compiled binary over an empty data dir and its
 * embedded chain: user A uploads and publishes a priced file with the SDK; user B finds it by
 * keyword, is refused, buys read permission with the SDK and downloads it byte-exact; user C is
 * granted read permission by A and downloads it. Everything goes through the server's HTTP port
 * (storage routes, GET /challenge, the public /rpc); the server's own indexer follows the chain.
 */
import { afterAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { createPublicClient, http, parseGwei, type Address } from "viem";
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { connectDirectory, type SearchResult } from "../../src/sdk/directory.ts";
import { connectStorage, StorageApiError } from "../../src/sdk/storage.ts";
import { runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";
import { until } from "../support/until.ts";

const POLL_MS = 200;
/** The server's indexer applies a transaction at its next poll: ten polls and some slack. */
const WAIT_MS = 10 * POLL_MS + 3000;
const dataDir = join(tempDir("e2e-directory"), "data");
let server: RunningBinary | undefined;
afterAll(async () => {
  await server?.stop();
});

async function admin(...args: string[]) {
  const r = await runBinary(["admin", ...args, "--data-dir", dataDir]);
  if (r.code !== 0) throw new Error(`stowage admin ${args.join(" ")} failed: ${r.stderr}`);
}


test("A publishes a priced file; B finds it, is refused, buys and downloads it; C is granted and downloads it", async () => {
  server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir], { STOWAGE_INDEXER_POLL: `${POLL_MS}ms` });
  const url = server.url;
  const [a, b, c] = [0, 1, 2].map(() => privateKeyToAccount(generatePrivateKey())) as [PrivateKeyAccount, PrivateKeyAccount, PrivateKeyAccount];
  const did = (x: PrivateKeyAccount) => `did:ethr:0x3d9:${x.address}`;
  // Gas for A and B (C sends no transaction); space for A's upload and traffic for every reader.
  await admin("fund", a.address, "1");
  await admin("fund", b.address, "1");
  await admin("grant", "--did", did(a), "--space", "16MiB");
  for (const x of [a, b, c]) await admin("grant", "--did", did(x), "--traffic", "16MiB");

  const content = new Uint8Array(randomBytes(3 * 1024 * 1024 + 17));
  const storeA = await connectStorage({ baseUrl: url, account: a });
  await storeA.login();
  const file = await storeA.upload("dfs", content, { name: "quarterly-report.pdf" });
  const dirA = await connectDirectory(url, { account: a });
  await dirA.publish({ cid: file.Cid, name: "Quarterly report Q3", size: file.Size, price: 2500n, keywords: ["finance", "quarterly"] });

  // B finds it by a keyword prefix.
  const dirB = await connectDirectory(url, { account: b });
  const hits = await until("search", () => dirB.search("financ"), (h: SearchResult[]) => h.length > 0, WAIT_MS, POLL_MS / 4);
  expect(hits).toEqual([{ Mid: file.Cid, Name: "Quarterly report Q3", Size: content.length, Public: false, Price: 2500, keywords: ["finance", "quarterly"], Owner: a.address }]);
  const [hit] = hits as [SearchResult];

  // B is refused until it buys.
  const storeB = await connectStorage({ baseUrl: url, account: b });
  await storeB.login();
  const status = async (store: typeof storeB) => {
    try {
      const res = await store.download("dfs", hit.Mid, { size: hit.Size });
      return { status: res.status, bytes: new Uint8Array(await res.arrayBuffer()) };
    } catch (err) {
      if (err instanceof StorageApiError) return { status: err.status, bytes: new Uint8Array() };
      throw err;
    }
  };
  expect((await status(storeB)).status).toBe(403);

  const chain = createPublicClient({ transport: http(`${url}/rpc`) });
  const owner = hit.Owner as Address;
  const before = await chain.getBalance({ address: owner });
  await dirB.buyRead(owner, hit.Mid);
  expect((await chain.getBalance({ address: owner })) - before).toBe(parseGwei("2500"));
  const bought = await until("B's download", () => status(storeB), (r) => r.status !== 403, WAIT_MS, POLL_MS / 4);
  expect(bought.status).toBe(200);
  expect(bought.bytes).toEqual(content);

  // C gets a grant from A.
  const storeC = await connectStorage({ baseUrl: url, account: c });
  await storeC.login();
  expect((await status(storeC)).status).toBe(403);
  await dirA.grantRead(hit.Mid, c.address);
  const granted = await until("C's download", () => status(storeC), (r) => r.status !== 403, WAIT_MS, POLL_MS / 4);
  expect(granted.status).toBe(200);
  expect(granted.bytes).toEqual(content);

  expect(await server.stop()).toBe(0);
  server = undefined;
}, 60_000);
