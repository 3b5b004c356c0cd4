/**
 * The SDK as someone outside the clone gets it: `npm pack` of packages/sdk, installed with npm into
 * an empty project (its dependencies from the registry, as a user's would come), then
 * - packages/sdk/README.md's example, run as written by **node** against the compiled binary with
 *   a key the operator funded: deposit, purchases, login, upload, download, list;
 * - its declarations type-checked from that project (NodeNext resolution, no Bun types): real
 *   types, the one wrong line refused;
 * - a page bundled from that project by esbuild (a standard bundler, the `browser` condition),
 *   run in Debian's Chromium: login, upload, byte-exact download, cross-origin.
 * So the package declares every dependency it imports (none bundled or missing) and its README
 * example works.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { buildSdk } from "../support/sdk-build.ts";
import { tempDir } from "../support/tmp.ts";

const root = join(import.meta.dir, "..", "..");
const work = tempDir("sdk-packed");
const app = join(work, "app");
const dataDir = join(work, "data");
let server: RunningBinary | undefined;
let pages: ReturnType<typeof Bun.serve> | undefined;
let browser: Browser | undefined;
const timeout = 240_000;

/** Runs a command to its end; its output, or a thrown error naming it. */
function run(cmd: string[], cwd: string, env: Record<string, string> = {}) {
  const r = Bun.spawnSync(cmd, { cwd, stdout: "pipe", stderr: "pipe", env: { ...process.env, ...env } });
  const out = { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
  if (out.code !== 0) throw new Error(`${cmd.join(" ")} failed (${out.code}):\n${out.stderr}\n${out.stdout}`);
  return out;
}

/** The README's marked code block (`<!-- test: run -->` before its fence). */
function readmeExample(): string {
  const text = readFileSync(join(root, "packages", "sdk", "README.md"), "utf8");
  const m = /<!-- test: run -->\n```js\n([\s\S]*?)```/.exec(text);
  if (!m) throw new Error("packages/sdk/README.md has no marked js block");
  return m[1] as string;
}

beforeAll(async () => {
  await buildSdk();
  const pack = run(["npm", "pack", "--pack-destination", work, "--json"], join(root, "packages", "sdk"));
  const [{ filename, files }] = JSON.parse(pack.stdout) as [{ filename: string; files: { path: string }[] }];
  // What ships: the builds, the declarations and the README; nothing a test left in dist.
  expect(files.map((f) => f.path.split("/").slice(0, 2).join("/")).filter((p, i, all) => all.indexOf(p) === i).sort()).toEqual(["README.md", "dist/browser", "dist/bun", "dist/esm", "dist/node", "dist/types", "package.json"]);
  mkdirSync(app, { recursive: true });
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  run(["npm", "install", "--no-audit", "--no-fund", join(work, filename)], app);
}, timeout);

afterAll(async () => {
  await browser?.close();
  await pages?.stop(true);
  await server?.stop();
});

test(
  "npm pack, installed into an empty project: the README's example runs on node, the types check, an esbuild page works in Chromium",
  async () => {
    // Dependencies stay imports, none copied into the builds (a user's bundler dedupes them)…
    for (const build of ["browser", "bun", "esm", "node"]) {
      const js = readFileSync(join(app, "node_modules", "@stowage", "sdk", "dist", build, "index.js"), "utf8");
      expect([build, [...new Set([...js.matchAll(/^\/\/ node_modules\/((?:@[^/]+\/)?[^/]+)/gm)].map((m) => m[1]))]]).toEqual([build, []]);
    }
    // …and every one of them is a dependency the install brought.
    const deps = Object.keys((JSON.parse(readFileSync(join(app, "node_modules", "@stowage", "sdk", "package.json"), "utf8")) as { dependencies: Record<string, string> }).dependencies);
    for (const dep of deps) expect(readdirSync(join(app, "node_modules", ...dep.split("/")))).toContain("package.json");

    pages = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: servePage });
    server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir], { STOWAGE_CORS_ORIGINS: pages.url.origin, STOWAGE_METRICS_LISTEN: "", STOWAGE_S3_API_PORT: "0" });

    // The README's example, as written, with a key the operator funded.
    const key = generatePrivateKey();
    const fund = await runBinary(["admin", "fund", privateKeyToAccount(key).address, "1", "--data-dir", dataDir]);
    expect(fund.code).toBe(0);
    writeFileSync(join(app, "example.mjs"), readmeExample());
    const example = run(["node", "example.mjs"], app, { STOWAGE_GATEWAY: server.url, STOWAGE_USER_KEY: key });
    expect(example.stdout).toMatch(/^baf\w+ "hello from the SDK\\n"\n/);
    expect(example.stdout).toContain("[ 'hello.txt 19' ]");

    // The declarations, from the project, for Node's own resolution.
    writeFileSync(join(app, "use.ts"), 'import { connectStorage, type FileEntry } from "@stowage/sdk";\nimport { privateKeyToAccount, generatePrivateKey } from "viem/accounts";\nconst store = await connectStorage({ baseUrl: "http://x", account: privateKeyToAccount(generatePrivateKey()) });\nconst e: FileEntry = await store.upload("dfs", new Uint8Array(3));\nexport const ok: [number, string] = [e.Size, e.Cid];\nexport const wrong: number = e.Cid;\n');
    writeFileSync(join(app, "tsconfig.json"), JSON.stringify({ compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", lib: ["ES2022", "DOM"], types: [], strict: true, noEmit: true, skipLibCheck: true }, files: ["use.ts"] }));
    const tsc = Bun.spawnSync([process.execPath, join(root, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json"], { cwd: app, stdout: "pipe", stderr: "pipe", env: { ...process.env, BUN_BE_BUN: "1" } });
    expect(tsc.stdout.toString().trim().split("\n")).toEqual([expect.stringContaining("use.ts(6,14): error TS2322: Type 'string' is not assignable to type 'number'.")]);

    // A page bundled by esbuild from the installed package: the browser build, no node: or bun:.
    writeFileSync(join(app, "page.js"), PAGE_JS);
    run([join(root, "node_modules", ".bin", "esbuild"), "page.js", "--bundle", "--format=esm", "--platform=browser", "--outfile=dist/page.js", "--log-level=warning"], app);
    const bundled = readFileSync(join(app, "dist", "page.js"), "utf8");
    expect(bundled.match(/["'](?:node|bun):[\w/]+["']/g) ?? []).toEqual([]);

    browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
    const page = await browser.newPage();
    const failures: string[] = [];
    page.on("pageerror", (e) => failures.push(e.message));
    page.on("console", (m) => m.type() === "error" && failures.push(m.text()));
    await page.goto(pages.url.href);
    await page.waitForSelector("body[data-ready=yes]", { state: "attached", timeout: 30_000 });
    const pageKey = generatePrivateKey();
    const did = await page.evaluate<string, [string, string]>(([b, k]) => (globalThis as unknown as { flow: { login(b: string, k: string): Promise<string> } }).flow.login(b, k), [server.url, pageKey]);
    for (const quota of [["--space", "4MiB"], ["--traffic", "8MiB"]]) expect((await runBinary(["admin", "grant", "--did", did, ...quota, "--data-dir", dataDir])).code).toBe(0);
    const r = await page.evaluate<{ same: boolean; size: number }, number>((n) => (globalThis as unknown as { flow: { work(n: number): Promise<{ same: boolean; size: number }> } }).flow.work(n), 300_001);
    expect(r).toEqual({ same: true, size: 300_001 });
    expect(failures).toEqual([]);
  },
  timeout,
);

const PAGE_JS = `import { connectStorage } from "@stowage/sdk";
import { privateKeyToAccount } from "viem/accounts";
let store;
window.flow = {
  async login(baseUrl, key) {
    store = await connectStorage({ baseUrl, account: privateKeyToAccount(key) });
    await store.login();
    return store.did;
  },
  async work(size) {
    const bytes = new Uint8Array(size);
    for (let i = 0; i < size; i += 65536) crypto.getRandomValues(bytes.subarray(i, i + 65536));
    const entry = await store.upload("dfs", new Blob([bytes]), { name: "from-esbuild.bin" });
    const back = new Uint8Array(await (await store.download("dfs", entry.Cid)).arrayBuffer());
    return { same: back.length === bytes.length && back.every((b, i) => b === bytes[i]), size: entry.Size };
  },
};
document.body.dataset.ready = "yes";
`;

function servePage(req: Request): Response {
  const path = new URL(req.url).pathname;
  if (path === "/") return new Response('<!doctype html><html><head><meta charset="utf-8"></head><body><script type="module" src="/page.js"></script></body></html>', { headers: { "content-type": "text/html" } });
  if (path === "/page.js") return new Response(Bun.file(join(app, "dist", "page.js")), { headers: { "content-type": "text/javascript" } });
  if (path === "/favicon.ico") return new Response(null, { status: 204 });
  return new Response("not found", { status: 404 });
}
