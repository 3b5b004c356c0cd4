/**
 * The SDK package (D19) as a web page gets it, in Debian's Chromium through playwright-core: the
 * page loads packages/sdk/dist/browser/index.js as built — byte for byte, not re-bundled — with
 * an import map for its dependencies (viem, @noble, @scure, bundled here from node_modules the way
 * a user's bundler or CDN would supply them). Served by a tiny Bun.serve on one origin, it talks to
 * the compiled binary on another (CORS allowed for that origin), with a test wallet key: login,
 * an upload with progress (the browser's XMLHttpRequest path), list, and a byte-exact download;
 * the test then reads the file back through the SDK on Bun with the same key, so the bytes the
 * browser sent are what the gateway stored.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { bytesToHex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { buildSdk } from "../support/sdk-build.ts";
import { tempDir } from "../support/tmp.ts";

const root = join(import.meta.dir, "..", "..");
const browserDist = join(root, "packages", "sdk", "dist", "browser");
const dataDir = join(tempDir("sdk-browser"), "data");
let server: RunningBinary | undefined;
let pages: ReturnType<typeof Bun.serve> | undefined;
let browser: Browser | undefined;

/** The page's own code: plain JS, as a user writes it against the package's names. */
const PAGE_JS = `
import { connectStorage } from "@stowage/sdk";
import { privateKeyToAccount } from "viem/accounts";
let store;
window.sdkFlow = {
  async login(baseUrl, key) {
    store = await connectStorage({ baseUrl, account: privateKeyToAccount(key) });
    await store.login();
    return { did: store.did, bun: typeof globalThis.Bun, node: typeof globalThis.process };
  },
  async work(size) {
    const bytes = new Uint8Array(size);
    for (let i = 0; i < size; i += 65536) crypto.getRandomValues(bytes.subarray(i, i + 65536));
    const progress = [];
    const entry = await store.upload("dfs", new Blob([bytes]), { name: "from-browser.bin", onProgress: (sent, total) => progress.push([sent, total]) });
    const list = await store.list("dfs");
    const back = new Uint8Array(await (await store.download("dfs", entry.Cid)).arrayBuffer());
    const same = back.length === bytes.length && back.every((b, i) => b === bytes[i]);
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
    return { cid: entry.Cid, size: entry.Size, same, sha256: Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join(""), listed: list.Object.map((o) => [o.Name, o.Cid, o.Size]), progress: progress.at(-1), steps: progress.length };
  },
};
document.body.dataset.ready = "yes";
`;

/** Bare specifiers a module imports (static `from "x"` and dynamic `import("x")`). */
const bareImports = (js: string) => new Set([...js.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*)["']([^"'./][^"']*)["']/g)].map((m) => m[1] as string));

beforeAll(async () => {
  await buildSdk();
  const install = Bun.spawnSync(["sh", "scripts/chromium.sh", "install"], { cwd: root, stdout: "inherit", stderr: "inherit" });
  if (install.exitCode !== 0) throw new Error("scripts/chromium.sh install failed");

  // The dependencies the built SDK leaves as imports, plus what the page itself imports: one ESM
  // file per specifier (shared code split out), named in the page's import map.
  const sdkFiles = readdirSync(browserDist).filter((f) => f.endsWith(".js"));
  const specifiers = new Set(["viem/accounts", ...sdkFiles.flatMap((f) => [...bareImports(readFileSync(join(browserDist, f), "utf8"))])]);
  const vendorSrc = tempDir("sdk-browser-vendor");
  const entries = [...specifiers].map((spec, i) => {
    const file = join(vendorSrc, `dep${i}.js`);
    writeFileSync(file, `export * from ${JSON.stringify(spec)};\n`);
    return { spec, file, out: `dep${i}.js` };
  });
  const vendorOut = join(vendorSrc, "out");
  const vendor = await Bun.build({ entrypoints: entries.map((e) => e.file), outdir: vendorOut, target: "browser", format: "esm", splitting: true, naming: { entry: "[name].js", chunk: "chunk-[hash].js" } });
  if (!vendor.success) throw new Error(`vendor bundle failed: ${vendor.logs.join("\n")}`);
  const importMap = { imports: { "@stowage/sdk": "/sdk/index.js", ...Object.fromEntries(entries.map((e) => [e.spec, `/vendor/${e.out}`])) } };
  const html = `<!doctype html><html><head><meta charset="utf-8"><script type="importmap">${JSON.stringify(importMap)}</script></head><body><script type="module" src="/page.js"></script></body></html>`;

  pages = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const path = new URL(req.url).pathname;
      const js = (body: Blob | string) => new Response(body, { headers: { "content-type": "text/javascript" } });
      if (path === "/") return new Response(html, { headers: { "content-type": "text/html" } });
      if (path === "/page.js") return js(PAGE_JS);
      // (Chromium asks for it by itself; a 404 would be logged as a console error.)
      if (path === "/favicon.ico") return new Response(null, { status: 204 });
      const file = /^\/(sdk|vendor)\/([\w.-]+\.js)$/.exec(path);
      if (file) return js(Bun.file(join(file[1] === "sdk" ? browserDist : vendorOut, file[2] as string)));
      return new Response("not found", { status: 404 });
    },
  });
  server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir], {
    STOWAGE_CORS_ORIGINS: pages.url.origin,
    STOWAGE_METRICS_LISTEN: "",
    STOWAGE_S3_API_PORT: "0",
  });
  // Root in CI containers: Chromium's sandbox needs user namespaces it may not have.
  browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await pages?.stop(true);
  await server?.stop();
});

test(
  "the built @stowage/sdk in Chromium, cross-origin: login with a wallet key, upload with progress, list, byte-exact download",
  async () => {
    const page = await (browser as Browser).newPage();
    const failures: string[] = [];
    const loaded: string[] = [];
    page.on("pageerror", (e) => failures.push(e.message));
    page.on("console", (m) => m.type() === "error" && failures.push(m.text()));
    page.on("response", (r) => {
      loaded.push(new URL(r.url()).pathname);
      if (r.status() >= 400) failures.push(`${r.status()} ${r.url()}`);
    });
    await page.goto((pages as ReturnType<typeof Bun.serve>).url.href);
    await page.waitForSelector("body[data-ready=yes]", { state: "attached", timeout: 30_000 });
    // The package's browser build itself, as built, is what the page runs.
    expect(loaded).toContain("/sdk/index.js");
    const served = await page.evaluate<string>("fetch('/sdk/index.js').then((r) => r.text())");
    expect(served).toBe(readFileSync(join(browserDist, "index.js"), "utf8"));

    const key = generatePrivateKey();
    const base = (server as RunningBinary).url;
    const login = await page.evaluate<{ did: string; bun: string; node: string }, [string, string]>(([b, k]) => (globalThis as unknown as { sdkFlow: { login(b: string, k: string): Promise<{ did: string; bun: string; node: string }> } }).sdkFlow.login(b, k), [base, key]);
    expect(login.did).toStartWith("did:");
    expect([login.bun, login.node]).toEqual(["undefined", "undefined"]);
    for (const quota of [["--space", "16MiB"], ["--traffic", "16MiB"]]) {
      const grant = await runBinary(["admin", "grant", "--did", login.did, ...quota, "--data-dir", dataDir]);
      if (grant.code !== 0) throw new Error(`admin grant failed: ${grant.stderr}`);
    }

    const size = 1_500_001;
    type Work = { cid: string; size: number; same: boolean; sha256: string; listed: [string, string, number][]; progress: [number, number]; steps: number };
    const r = await page.evaluate<Work, number>((n) => (globalThis as unknown as { sdkFlow: { work(n: number): Promise<Work> } }).sdkFlow.work(n), size);
    expect(r.same).toBe(true);
    expect(r.size).toBe(size);
    expect(r.listed).toEqual([["from-browser.bin", r.cid, size]]);
    // Progress came from the browser's upload (XMLHttpRequest), up to the whole request.
    expect(r.steps).toBeGreaterThan(0);
    expect(r.progress[0]).toBe(r.progress[1]);
    expect(r.progress[1]).toBeGreaterThan(size);
    expect(failures).toEqual([]);

    // What the gateway stored is what the browser sent: read back by the SDK on Bun, same key.
    const store = await connectStorage({ baseUrl: base, account: privateKeyToAccount(key) });
    await store.login();
    const stored = new Uint8Array(await (await store.download("dfs", r.cid)).arrayBuffer());
    expect(stored.length).toBe(size);
    expect(bytesToHex(new Uint8Array(await crypto.subtle.digest("SHA-256", stored))).slice(2)).toBe(r.sha256);
  },
  120_000,
);
