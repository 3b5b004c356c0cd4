/**
 * The SDK package (D19) as a Node user gets it: scripts/build-sdk.ts builds packages/sdk/dist, then
 * a plain ESM script run by **node** (not Bun) imports "@stowage/sdk" through the package's own
 * "exports" and, against the compiled binary, logs in with a fresh key, uploads to dfs, downloads
 * byte-exact and lists. A Buffer or Bun.* left on that path fails here, not in a user's hands.
 * The declarations are checked through "exports" too, from a DOM project with no Bun types, and
 * must name no module outside the package (no server model, so no Elysia or drizzle for users).
 * Under Bun the package's own entry ("bun" condition) gives the payload the system's libsodium.
 */
import { expect, test } from "bun:test";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { decryptStream, encryptStream, generateIdentity, identityToRecipient } from "../../src/sdk/age.ts";
import { ensureAgeCli } from "../support/age-cli.ts";
import { runBinary, startBinary } from "../support/binary.ts";
import { buildSdk } from "../support/sdk-build.ts";
import { tempDir } from "../support/tmp.ts";

const root = join(import.meta.dir, "..", "..");
const dist = join(root, "packages", "sdk", "dist");
const timeout = 120_000;

/** Runs inside packages/sdk (dist is in the package's scope), so "@stowage/sdk" resolves by
 * self-reference through "exports" → dist/node/index.js; viem/accounts from the root's node_modules.
 * Opens an age file Bun sealed (argv 3, identity argv 4) and seals the same plaintext back (to
 * argv 5), with the AEAD the package picks on Node; logs in, prints the DID, waits for a line on
 * stdin (the test grants quota), then works. */
const SCRIPT = `
import { connectStorage, decryptStream, encryptStream, identityToRecipient, payloadAead } from "@stowage/sdk";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createInterface } from "node:readline";
import { readFileSync, writeFileSync } from "node:fs";
const out = (o) => process.stdout.write(JSON.stringify(o) + "\\n");
const [, , url, sealedPath, identity, resealedPath] = process.argv;
const opened = new Uint8Array(await new Response(decryptStream([identity], new Blob([readFileSync(sealedPath)]).stream(), { inPlace: true })).arrayBuffer());
writeFileSync(resealedPath, new Uint8Array(await new Response(encryptStream([identityToRecipient(identity)], new Blob([opened]).stream())).arrayBuffer()));
const store = await connectStorage({ baseUrl: url, account: privateKeyToAccount(generatePrivateKey()) });
await store.login();
out({ did: store.did, bun: typeof globalThis.Bun, aead: (await payloadAead()).name, opened: Buffer.from(opened).toString("base64") });
for await (const _ of createInterface({ input: process.stdin })) break;
let pathError = "";
try { await store.upload("dfs", "/etc/hostname"); } catch (e) { pathError = e.constructor.name + ": " + e.message; }
const bytes = new Uint8Array(700_001);
for (let i = 0; i < bytes.length; i += 65_536) crypto.getRandomValues(bytes.subarray(i, i + 65_536)); // (Web Crypto: 64 KiB a call)
const entry = await store.upload("dfs", bytes, { name: "from-node.bin" });
const back = new Uint8Array(await (await store.download("dfs", entry.Cid)).arrayBuffer());
const same = back.length === bytes.length && back.every((b, i) => b === bytes[i]);
const list = await store.list("dfs");
out({ cid: entry.Cid, size: entry.Size, same, listed: list.Object.map((o) => [o.Name, o.Cid, o.Size]), pathError });
process.exit(0);
`;

const TYPES_USE = `import { connectStorage, type FileEntry, type Gateway } from "@stowage/sdk";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
const store = await connectStorage({ baseUrl: "http://x", account: privateKeyToAccount(generatePrivateKey()) });
const e: FileEntry = await store.upload("dfs", new Uint8Array(3));
declare const g: Gateway;
const ok: [number, string, bigint] = [e.Size, e.Cid, (await g.prices()).space];
const wrong: number = e.Cid;
export { ok, wrong };
`;

async function* lines(stream: ReadableStream<Uint8Array>) {
  let buf = "";
  const dec = new TextDecoder();
  for await (const chunk of stream) {
    buf += dec.decode(chunk, { stream: true });
    for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
      yield buf.slice(0, i);
      buf = buf.slice(i + 1);
    }
  }
}

test(
  "the built @stowage/sdk runs on node: login, upload to dfs, byte-exact download, list, age files both ways with Node's own AEAD; the browser build imports no node: or bun:; on Bun its own entry opens the payload natively",
  async () => {
    await buildSdk();

    // The browser build: no runtime-only module anywhere in it (static or dynamic import).
    const browser = readdirSync(join(dist, "browser")).filter((f) => f.endsWith(".js"));
    expect(browser.length).toBeGreaterThan(0);
    for (const f of browser) {
      const js = readFileSync(join(dist, "browser", f), "utf8");
      expect(js.match(/(?:from|import\s*\(?)\s*["'](?:node|bun):[^"']*["']/g) ?? []).toEqual([]);
      expect(js).not.toMatch(/\bBuffer\.from\b/);
    }
    expect(readdirSync(join(dist, "types", "sdk"))).toContain("index.d.ts");

    // Bun resolves the package's "bun" condition: the same API, the payload sealed and opened by
    // the system's OpenSSL (libsodium where it is missing) without being asked.
    await ensureAgeCli();
    const onBun = join(dist, "bun-smoke.mjs");
    writeFileSync(onBun, 'import { payloadAead, connectEncryption } from "@stowage/sdk";\nconsole.log(JSON.stringify({ aead: (await payloadAead()).name, api: typeof connectEncryption }));\n');
    const bunRun = Bun.spawnSync([process.execPath, onBun], { cwd: join(root, "packages", "sdk"), stdout: "pipe", stderr: "pipe", env: { ...process.env, BUN_BE_BUN: "1" } });
    expect(bunRun.stderr.toString()).toBe("");
    expect(JSON.parse(bunRun.stdout.toString())).toEqual({ aead: "openssl-native", api: "function" });
    // The declarations name only the package's own files and its dependencies: no server module
    // (http/model.ts and its Elysia, drizzle schemas), which a user of the package does not have.
    expect(readdirSync(join(dist, "types"))).toEqual(["sdk"]);
    const deps = Object.keys((JSON.parse(readFileSync(join(root, "packages", "sdk", "package.json"), "utf8")) as { dependencies: Record<string, string> }).dependencies);
    const specifiers = readdirSync(join(dist, "types", "sdk")).flatMap((f) => [...readFileSync(join(dist, "types", "sdk", f), "utf8").matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*)["']([^"']+)["']/g)].map((m) => m[1] ?? ""));
    expect(specifiers.length).toBeGreaterThan(10);
    expect(specifiers.filter((x) => !/^\.\/[^/]+$/.test(x) && !deps.some((d) => x === d || x.startsWith(`${d}/`)))).toEqual([]);

    // The declarations through "exports" → "types", for a DOM project without Bun's types: real
    // types (the one wrong line is refused), not `any`.
    const check = join(dist, "types-check");
    mkdirSync(check, { recursive: true });
    writeFileSync(join(check, "use.ts"), TYPES_USE);
    writeFileSync(join(check, "tsconfig.json"), JSON.stringify({ compilerOptions: { target: "ES2022", module: "ESNext", moduleResolution: "bundler", lib: ["ES2022", "DOM"], types: [], strict: true, noEmit: true, skipLibCheck: true }, files: ["use.ts"] }));
    const tsc = Bun.spawnSync([process.execPath, join(root, "node_modules", "typescript", "bin", "tsc"), "-p", join(check, "tsconfig.json")], { cwd: join(root, "packages", "sdk"), stdout: "pipe", stderr: "pipe", env: { ...process.env, BUN_BE_BUN: "1" } });
    const errors = tsc.stdout.toString().trim().split("\n");
    expect(errors).toEqual([expect.stringContaining("use.ts(7,7): error TS2322: Type 'string' is not assignable to type 'number'.")]);

    const script = join(dist, "node-smoke.mjs");
    writeFileSync(script, SCRIPT);
    const dataDir = tempDir("sdk-package");
    const server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir]);
    // An age file sealed here (OpenSSL's AEAD under Bun, checked against the testkit and Debian's
    // age) opens under Node with Node's, and what Node seals opens here: 3 MiB and a part.
    const plain = new Uint8Array(3 * 1024 * 1024 + 5);
    for (let i = 0; i < plain.length; i += 65_536) crypto.getRandomValues(plain.subarray(i, i + 65_536));
    const identity = generateIdentity();
    const [sealedPath, resealedPath] = [join(dist, "from-bun.age"), join(dist, "from-node.age")];
    writeFileSync(sealedPath, await new Response(encryptStream([identityToRecipient(identity)], new Blob([plain]).stream())).bytes());
    const node = Bun.spawn(["node", script, server.url, sealedPath, identity, resealedPath], { cwd: join(root, "packages", "sdk"), stdin: "pipe", stdout: "pipe", stderr: "pipe" });
    const stderr = new Response(node.stderr).text();
    try {
      const it = lines(node.stdout);
      const first = await it.next();
      if (first.done) throw new Error(`node exited before logging in: ${await stderr}`);
      const { did, bun, aead, opened } = JSON.parse(first.value) as { did: string; bun: string; aead: string; opened: string };
      expect(bun).toBe("undefined");
      // Node's own crypto through the package's "node" entry, not libsodium's WASM.
      expect(aead).toBe("node-crypto");
      expect(Buffer.compare(Buffer.from(opened, "base64"), plain)).toBe(0);
      const resealed = readFileSync(resealedPath);
      expect(Buffer.compare(await new Response(decryptStream([identity], new Blob([resealed]).stream())).bytes(), plain)).toBe(0);
      expect(did).toStartWith("did:");
      for (const quota of [["--space", "16MiB"], ["--traffic", "16MiB"]]) {
        const grant = await runBinary(["admin", "grant", "--did", did, ...quota, "--data-dir", dataDir]);
        if (grant.code !== 0) throw new Error(`admin grant failed: ${grant.stderr}`);
      }
      node.stdin.write("granted\n");
      await node.stdin.flush();
      const second = await it.next();
      if (second.done) throw new Error(`node failed: ${await stderr}`);
      const r = JSON.parse(second.value) as { cid: string; size: number; same: boolean; listed: [string, string, number][]; pathError: string };
      expect(r.same).toBe(true);
      expect(r.size).toBe(700_001);
      expect(r.listed).toEqual([["from-node.bin", r.cid, 700_001]]);
      // A file path is a Bun convenience: elsewhere a clear error, not a ReferenceError on Bun.
      expect(r.pathError).toStartWith("TypeError: a file path");
      expect(await node.exited).toBe(0);
    } finally {
      node.kill();
      expect(await server.stop("SIGTERM")).toBe(0);
    }
  },
  timeout,
);
