/**
 * The path gateway and the denylist (D25) end to end: the compiled binary over an empty data dir,
 * its embedded chain, and Debian's Chromium through playwright-core.
 *
 * - A browser opens a public file's `/ipfs/<cid>` and gets the file; a private one and an unknown
 *   CID get the 404 that says how to read them.
 * - An uploaded HTML page whose script reports where it ran (a request to a probe server, and
 *   localStorage) never runs on the gateway's origin: there it is an attachment under the sandbox.
 *   With STOWAGE_GATEWAY_ORIGIN (a subdomain gateway on *.localhost) the browser is sent to the
 *   page's own origin, where it runs — and nowhere else.
 * - `stowage admin block` on the running server, and a line appended to the STOWAGE_DENYLIST file
 *   (a double-hashed one), each turn the file into a 410 within their poll; /metrics counts them;
 *   `stowage admin unblock` serves it again.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { appendFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { base58btc } from "multiformats/bases/base58";
import { CID } from "multiformats/cid";
import { sha256 } from "multiformats/hashes/sha2";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { connectDirectory } from "../../src/sdk/directory.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";
import { until } from "../support/until.ts";

setDefaultTimeout(120_000);

const POLL_MS = 200;
const root = tempDir("e2e-path-gateway");
const dataDir = join(root, "data");
const denyFile = join(root, "takedowns.deny");
let server: RunningBinary | undefined;
let browser: Browser | undefined;
let url = "";
let port = 0;

/** Where the page's script reports: each request's `origin` query. */
const ran: string[] = [];
const probe = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch(request) {
    ran.push(new URL(request.url).searchParams.get("origin") ?? "?");
    return new Response("ok", { headers: { "access-control-allow-origin": "*" } });
  },
});

function freePort(): number {
  const p = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const n = p.port;
  p.stop(true);
  return n;
}

async function start(env: Record<string, string> = {}) {
  server = await startBinary(["serve", "--port", String(port), "--host", "127.0.0.1", "--data-dir", dataDir], {
    STOWAGE_PUBLIC_URL: url,
    STOWAGE_INDEXER_POLL: `${POLL_MS}ms`,
    STOWAGE_METRICS_LISTEN: "127.0.0.1:0",
    STOWAGE_DENYLIST: denyFile,
    ...env,
  });
}

async function admin(...args: string[]) {
  const r = await runBinary(["admin", ...args, "--data-dir", dataDir]);
  if (r.code !== 0) throw new Error(`stowage admin ${args.join(" ")} failed: ${r.stderr}`);
  return r;
}

const metricsUrl = () => /"msg":"metrics listening","url":"([^"]+)"/.exec(server?.output() ?? "")?.[1] as string;

beforeAll(async () => {
  const installed = Bun.spawnSync(["sh", "scripts/chromium.sh", "install"], { stdout: "inherit", stderr: "inherit" });
  if (installed.exitCode !== 0) throw new Error("scripts/chromium.sh install failed");
  port = freePort();
  url = `http://127.0.0.1:${port}`;
  await writeFile(denyFile, "version: 1\nname: takedowns\n---\n");
  await start();
  // Root in CI containers: Chromium's sandbox needs user namespaces it may not have. *.localhost
  // is the subdomain gateway's host: mapped to the loopback the binary listens on.
  browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox", "--host-resolver-rules=MAP *.localhost 127.0.0.1"] });
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  probe.stop(true);
});

const text = (s: string) => new TextEncoder().encode(s);
const hello = text(`hello from the path gateway ${crypto.randomUUID()}\n`);
const page = text(`<!doctype html><title>uploaded</title><script>
localStorage.setItem("ran", location.origin);
fetch("http://127.0.0.1:PROBE/ran?origin=" + encodeURIComponent(location.origin), { mode: "no-cors" });
</script><p>an uploaded page</p>`);
let files: { hello: string; page: string; secret: string };

test("a browser opens a public file and gets it; private and unknown CIDs get a 404 saying how to read them", async () => {
  const a = privateKeyToAccount(generatePrivateKey());
  await admin("fund", a.address, "1");
  await admin("grant", "--did", `did:ethr:0x3d9:${a.address}`, "--space", "16MiB");
  await admin("grant", "--did", `did:ethr:0x3d9:${a.address}`, "--traffic", "16MiB");
  const store = await connectStorage({ baseUrl: url, account: a });
  await store.login();
  const dir = await connectDirectory(url, { account: a });
  const pageBytes = text(new TextDecoder().decode(page).replace("PROBE", String(probe.port)));
  const h = await store.upload("ipfs", hello, { name: "hello.txt" });
  const p = await store.upload("ipfs", pageBytes, { name: "page.html" });
  const s = await store.upload("ipfs", text("not for you"), { name: "secret.txt" });
  for (const [f, name] of [[h, "hello.txt"], [p, "page.html"]] as const) await dir.publish({ cid: f.Cid, name, size: f.Size, isPublic: true, price: 0 });
  files = { hello: h.Cid, page: p.Cid, secret: s.Cid };
  await until("the indexer", () => fetch(`${url}/ipfs/${h.Cid}`).then((r) => r.status), (s) => s === 200, 30_000);

  const tab = await (browser as Browser).newPage();
  const res = await tab.goto(`${url}/ipfs/${files.hello}`);
  expect(res?.status()).toBe(200);
  expect(await tab.textContent("body")).toBe(new TextDecoder().decode(hello));
  for (const cid of [files.secret, CID.createV1(0x55, await sha256.digest(text("nobody stores this"))).toString()]) {
    const refused = await tab.goto(`${url}/ipfs/${cid}`);
    expect(refused?.status()).toBe(404);
    const body = JSON.parse((await tab.textContent("body")) ?? "{}") as { Description: string; HTTPStatusCode: number };
    expect(body.HTTPStatusCode).toBe(404);
    expect(body.Description).toContain(`stowage get ${cid}`);
  }
  await tab.close();
});

test("an uploaded HTML page does not run on the gateway's origin", async () => {
  const context = await (browser as Browser).newContext({ acceptDownloads: true });
  const tab = await context.newPage();
  // An attachment: the browser saves it, and renders nothing.
  const download = tab.waitForEvent("download");
  await tab.goto(`${url}/ipfs/${files.page}`).catch(() => {});
  expect((await download).suggestedFilename()).toBe("page.html");
  await tab.goto(`${url}/healthz`);
  expect(await tab.evaluate(() => localStorage.getItem("ran"))).toBeNull();
  // Were a browser to render it anyway, the document would be sandboxed: no script, no loads.
  const res = await fetch(`${url}/ipfs/${files.page}`);
  expect(res.headers.get("content-disposition")).toStartWith("attachment");
  expect(res.headers.get("content-security-policy")).toBe("sandbox; default-src 'none'");
  expect(res.headers.get("x-content-type-options")).toBe("nosniff");
  await res.arrayBuffer();
  // Nothing reported from anywhere: the script never ran (the last test shows the probe hears it when it does).
  expect(ran).toEqual([]);
  await context.close();
});

test("stowage admin block on the running server: 410 within a second; /metrics counts it; unblock serves it again", async () => {
  const blocked = await admin("block", files.hello, "--reason", "test takedown");
  expect(blocked.stdout.trim()).toBe(`/ipfs/${files.hello}`);
  await until("the block", () => fetch(`${url}/ipfs/${files.hello}`).then((r) => r.status), (s) => s === 410, 10_000);
  const tab = await (browser as Browser).newPage();
  expect((await tab.goto(`${url}/ipfs/${files.hello}`))?.status()).toBe(410);
  await tab.close();
  const listed = await admin("blocked");
  expect(listed.stdout).toContain(`/ipfs/${files.hello}`);
  expect(listed.stdout).toContain("test takedown");
  const metrics = await (await fetch(metricsUrl())).text();
  expect(Number(/^stowage_blocked_requests_total\{door="path"\} (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(2);
  expect(metrics).toMatch(/^stowage_denylist_rules\{source="operator"\} 1$/m);
  await admin("unblock", files.hello);
  await until("the unblock", () => fetch(`${url}/ipfs/${files.hello}`).then((r) => r.status), (s) => s === 200, 10_000);
  // Unblocking what is not blocked says so.
  expect((await runBinary(["admin", "unblock", files.hello, "--data-dir", dataDir])).code).toBe(1);
});

test("a double-hashed line appended to the STOWAGE_DENYLIST file blocks within its check; removed, served again", async () => {
  const mh = base58btc.baseEncode(CID.parse(files.hello).multihash.bytes);
  const double = base58btc.baseEncode((await sha256.digest(text(mh))).bytes);
  await appendFile(denyFile, `# a takedown notice\n//${double}\n`);
  await until("the file's rule", () => fetch(`${url}/ipfs/${files.hello}?format=raw`).then((r) => r.status), (s) => s === 410, 10_000);
  expect((await fetch(`${url}/ipfs/${files.hello}`)).status).toBe(410);
  await writeFile(denyFile, "version: 1\nname: takedowns\n---\n");
  await until("the rule removed", () => fetch(`${url}/ipfs/${files.hello}`).then((r) => r.status), (s) => s === 200, 10_000);
});

test("with STOWAGE_GATEWAY_ORIGIN, the browser is sent to the page's own origin, where it runs — and only there", async () => {
  await server?.stop();
  await start({ STOWAGE_GATEWAY_ORIGIN: `http://{cid}.ipfs.localhost:${port}` });
  const context = await (browser as Browser).newContext();
  const tab = await context.newPage();
  const res = await tab.goto(`${url}/ipfs/${files.page}`);
  const siteOrigin = `http://${files.page}.ipfs.localhost:${port}`;
  expect(tab.url()).toBe(`${siteOrigin}/`);
  expect(res?.status()).toBe(200);
  expect(await tab.textContent("p")).toBe("an uploaded page");
  await until("the page's report", () => ran.length, (n) => n > 0, 10_000);
  expect(ran).toEqual([siteOrigin]);
  // The gateway's own origin is untouched.
  await tab.goto(`${url}/healthz`);
  expect(await tab.evaluate(() => localStorage.getItem("ran"))).toBeNull();
  // The site origin serves content only: its /healthz is a path below the page's CID, not the gateway's.
  expect((await tab.goto(`${siteOrigin}/healthz`))?.status()).toBe(404);
  await context.close();
});
