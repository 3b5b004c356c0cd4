/**
 * The web console (D19) in Debian's Chromium through playwright-core, against the compiled binary
 * (which serves the page from inside itself). An EIP-1193 test wallet is injected into the page:
 * its requests come back here, where a viem account signs (personal_sign, eth_signTypedData_v4)
 * and sends transactions through the gateway's /rpc, as a browser wallet would; like one, it
 * refuses a sign-in message whose domain is not the page's origin (EIP-4361).
 *
 * Flow 1, at 390 px wide: sign in with the wallet (SIWE), start a storage session (the wallet
 * signs one SIWE grant with a ReCap for the page's session key), deposit and buy space and traffic, upload a 3 MiB
 * file to dfs and ipfs with progress shown, see it on both, download it byte-exact, publish it and
 * find it in the directory, delete the dfs copy, record points. Flow 2: sign in by email code
 * (the page says the code went to the dev mailbox, where it is read); the account, which has no
 * wallet, sees the account page only, links the injected wallet (one signature naming the
 * account), then uploads and downloads; the wallet's sign-in opens the same account. A wallet
 * that has an account of its own is not linked, and the page says to sign in with it. Without a
 * wallet in the browser, the sign-in and account pages say how to get one, or give the command
 * line's lines for this gateway. Flow 3: an
 * encrypted upload (sealed in the page, D20) downloaded and opened byte-exact, and the session
 * keys screen: two tabs' grants listed, one revoked (its next upload refused), then this page's.
 * Flow 4: an age identity wrapped the earlier way is re-wrapped at its first unlock in the page.
 * Each page is saved as a screenshot (the path is printed) and checked for horizontal overflow.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { createWalletClient, hashTypedData, hexToString, http, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { Database } from "bun:sqlite";
import { generateIdentity } from "../../src/sdk/age.ts";
import { encryptionKeyTypedData, normaliseSignature, unwrapIdentity, wrappingKey } from "../../src/sdk/encryption.ts";
import { legacyWrapped } from "../support/legacy-age.ts";
import { defineStowageChain } from "../../src/chain/define.ts";
import { runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";
import { until } from "../support/until.ts";

const WIDTH = 390;
const MIB = 1024 * 1024;
const dataDir = join(tempDir("console"), "data");
// Kept after the run, so they can be looked at.
const shots = mkdtempSync(join(tmpdir(), "stowage-console-shots-"));
let server: RunningBinary | undefined;
let browser: Browser | undefined;
let url = "";

/** A port free now: the sign-in origin (STOWAGE_ALLOWED_ORIGINS) must be known before the start. */
function freePort(): number {
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = probe.port;
  probe.stop(true);
  return port;
}

beforeAll(async () => {
  const chromiumPath = Bun.spawnSync(["sh", "scripts/chromium.sh", "install"], { stdout: "inherit", stderr: "inherit" });
  if (chromiumPath.exitCode !== 0) throw new Error("scripts/chromium.sh install failed");
  const port = freePort();
  url = `http://127.0.0.1:${port}`;
  server = await startBinary(["serve", "--port", String(port), "--host", "127.0.0.1", "--data-dir", dataDir], {
    STOWAGE_PUBLIC_URL: url,
    STOWAGE_ALLOWED_ORIGINS: url,
    STOWAGE_INDEXER_POLL: "200ms",
    STOWAGE_METRICS_LISTEN: "127.0.0.1:0",
    STOWAGE_S3_API_PORT: "0",
  });
  // Root in CI containers: Chromium's sandbox needs user namespaces it may not have.
  browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
  console.log(`console screenshots: ${shots}`);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

async function admin(...args: string[]) {
  const r = await runBinary(["admin", ...args, "--data-dir", dataDir]);
  if (r.code !== 0) throw new Error(`stowage admin ${args.join(" ")} failed: ${r.stderr}`);
}

/** Saves the page as `name`.png and checks that nothing is wider than the screen. */
async function shoot(page: Page, name: string) {
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
  const { scrollWidth, innerWidth } = await page.evaluate<{ scrollWidth: number; innerWidth: number }>("({ scrollWidth: document.scrollingElement.scrollWidth, innerWidth: window.innerWidth })");
  expect({ page: name, scrollWidth }).toEqual({ page: name, scrollWidth: Math.min(scrollWidth, innerWidth) });
}

/** Waits until the router has rendered `page` (main.ts marks body[data-ready]). */
const ready = (page: Page, name: string) => page.waitForSelector(`body[data-ready="${name}"]`, { timeout: 30_000 });
/**
 * Waits until `expression`, evaluated in the page, is true. Polled with page.evaluate: the
 * console's CSP forbids the eval that waitForFunction does with an expression (as it should).
 */
const waitFor = (page: Page, expression: string, timeoutMs = 30_000) => until(expression, () => page.evaluate<boolean>(expression), Boolean, timeoutMs, 50);

/** Waits for the status line to say `pattern`; an error on it fails at once, saying what it was. */
async function waitStatus(page: Page, pattern: RegExp) {
  const line = `document.getElementById("status")`;
  await waitFor(page, `new RegExp(${JSON.stringify(pattern.source)}).test(${line}.textContent) || ${line}.className === "error"`, 60_000);
  const said = await page.textContent("#status");
  if (!pattern.test(said ?? "")) {
    await page.screenshot({ path: join(shots, "failed.png"), fullPage: true });
    throw new Error(`the console says: ${said} (awaited ${pattern})`);
  }
}

/** A context whose pages have `window.ethereum`: an EIP-1193 provider answered by `account`. */
async function walletContext(): Promise<{ context: BrowserContext; address: Hex; prompts: string[]; account: PrivateKeyAccount }> {
  const account = privateKeyToAccount(generatePrivateKey());
  const info = (await (await fetch(`${url}/chain`)).json()) as { chainId: number };
  const chain = defineStowageChain(info.chainId, `${url}/rpc`);
  const sender = createWalletClient({ account, chain, transport: http(`${url}/rpc`) });
  const prompts: string[] = [];
  const context = await (browser as Browser).newContext({ viewport: { width: WIDTH, height: 844 }, acceptDownloads: true });
  await context.exposeBinding("__stowageTestWallet", async ({ frame }, method: string, paramsJson: string): Promise<string> => {
    const params = JSON.parse(paramsJson) as unknown[];
    const answer = async (): Promise<unknown> => {
      switch (method) {
        case "eth_requestAccounts":
        case "eth_accounts":
          return [account.address];
        case "eth_chainId":
          return `0x${info.chainId.toString(16)}`;
        case "personal_sign": {
          const text = hexToString(params[0] as Hex);
          const siwe = /^(?:([a-z][a-z0-9+.-]*):\/\/)?(\S+) wants you to sign in with your Ethereum account:\n/.exec(text);
          if (siwe) {
            // EIP-4361: the wallet shows and checks the requesting origin; another site's message is refused.
            const page = new URL(frame.url()).origin;
            if (`${siwe[1] ?? "https"}://${siwe[2]}` !== page) throw new Error(`the message is for ${siwe[2]}, not this page (${page})`);
            prompts.push(/^Resources:\n- urn:recap:/m.test(text) ? "personal_sign:grant" : /^Link this wallet to Stowage account /m.test(text) ? "personal_sign:link" : "personal_sign:sign-in");
          } else prompts.push(method);
          return account.signMessage({ message: { raw: params[0] as Hex } });
        }
        case "eth_signTypedData_v4": {
          const typed = JSON.parse(params[1] as string) as Parameters<typeof hashTypedData>[0];
          prompts.push(`${method}:${typed.primaryType}`);
          return account.sign({ hash: hashTypedData(typed) });
        }
        case "eth_sendTransaction": {
          const tx = params[0] as { to: Hex; data?: Hex; value?: Hex; gas?: Hex };
          prompts.push(method);
          return sender.sendTransaction({ to: tx.to, data: tx.data, value: tx.value ? BigInt(tx.value) : 0n, ...(tx.gas ? { gas: BigInt(tx.gas) } : {}) });
        }
        default: {
          // Reads go to the chain, as a wallet forwards them to its node.
          const res = await fetch(`${url}/rpc`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }) });
          const body = (await res.json()) as { result?: unknown; error?: { message: string } };
          if (body.error) throw new Error(body.error.message);
          return body.result;
        }
      }
    };
    return JSON.stringify(await answer());
  });
  await context.addInitScript(() => {
    const call = (globalThis as unknown as { __stowageTestWallet: (m: string, p: string) => Promise<string> }).__stowageTestWallet;
    (globalThis as unknown as { ethereum: unknown }).ethereum = {
      request: async ({ method, params }: { method: string; params?: unknown[] }) => JSON.parse(await call(method, JSON.stringify(params ?? []))),
      on() {},
      removeListener() {},
    };
  });
  return { context, address: account.address, prompts, account };
}

test(
  "wallet: sign in, grant the session key, buy, upload 3 MiB with progress, list on dfs and ipfs, download byte-exact, publish and find, delete",
  async () => {
    const { context, address, prompts } = await walletContext();
    await admin("fund", address, "2");
    const page = await context.newPage();
    const failures: string[] = [];
    page.on("pageerror", (e) => failures.push(e.message));
    // A failed load is told by its response, with its address.
    page.on("console", (m) => m.type() === "error" && !m.text().startsWith("Failed to load resource") && failures.push(m.text()));
    page.on("response", (r) => r.status() >= 400 && failures.push(`${r.status()} ${r.url()}`));

    await page.goto(`${url}/console`);
    await page.waitForSelector("#wallet-signin");
    expect(await page.locator("#nav").isHidden()).toBe(true); // nothing to navigate before signing in
    await shoot(page, "01-sign-in-wallet");
    await page.click("#wallet-signin");
    await ready(page, "files");
    expect(prompts).toEqual(["personal_sign:sign-in"]);
    await shoot(page, "02-files-before-grant");

    // One grant (origin-bound, with its ReCap), then no prompt per file, and no storage login.
    await page.click("#grant-button");
    await page.waitForSelector("#grant >> text=signs for you until");
    expect(prompts).toEqual(["personal_sign:sign-in", "personal_sign:grant"]);

    // Quota: a deposit (the wallet sends it), then space and traffic from it.
    await page.click('nav a[href="#/quota"]');
    await ready(page, "quota");
    await shoot(page, "03-quota-empty");
    await page.fill('#deposit-form input[name="eth"]', "1");
    await page.click('#deposit-form button[type="submit"]');
    await waitStatus(page, /^Deposited 1 ETH/);
    await ready(page, "quota");
    const before = await page.textContent('#space [data-field="SizeByte"]');
    await page.fill('#buy-space-form input[name="mib"]', "64");
    await page.click('#buy-space-form button[type="submit"]');
    await waitStatus(page, /^Bought 64\.0 MiB of space/);
    await waitFor(page, `document.querySelector('#space [data-field="SizeByte"]')?.textContent === "64.0 MiB"`);
    expect(before).toBe("0 B");
    await page.click('#buy-traffic-form button[type="submit"]');
    await waitStatus(page, /^Bought 256\.0 MiB of traffic/);
    await waitFor(page, `document.querySelector('#traffic [data-field="SizeByte"]')?.textContent === "256.0 MiB"`);
    await shoot(page, "04-quota-bought");
    expect(prompts.filter((p) => p === "eth_sendTransaction")).toHaveLength(1);

    // Upload 3 MiB to both back-ends, throttled so that progress has steps to show.
    const content = crypto.getRandomValues(new Uint8Array(3 * MIB));
    const name = "atlas-3mib.bin";
    await page.click('nav a[href="#/files"]');
    await ready(page, "files");
    const cdp = await context.newCDPSession(page);
    await cdp.send("Network.emulateNetworkConditions", { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: 6 * MIB });
    // Every text the progress line shows, as it shows it.
    await page.evaluate(`{
      const text = document.getElementById("upload-progress-text");
      window.progressSeen = [];
      new MutationObserver(() => window.progressSeen.push(text.textContent)).observe(text, { childList: true, characterData: true, subtree: true });
    }`);
    // dfs is the default, as for `stowage put`; ipfs too, here.
    expect(await page.isChecked('#upload-form input[name="dfs"]')).toBe(true);
    expect(await page.isChecked('#upload-form input[name="ipfs"]')).toBe(false);
    await page.check('#upload-form input[name="ipfs"]');
    await page.setInputFiles('#upload-form input[name="file"]', { name, mimeType: "application/octet-stream", buffer: Buffer.from(content) });
    await page.click('#upload-form button[type="submit"]');
    await waitStatus(page, /^Uploaded atlas-3mib\.bin to dfs and ipfs/);
    await cdp.send("Network.emulateNetworkConditions", { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
    const seen = await page.evaluate<string[]>("window.progressSeen");
    // Steps between nothing and all were shown, for each back-end.
    for (const kind of ["dfs", "ipfs"]) expect(seen.some((s) => s.startsWith(`${kind}: `) && / of 3\.0 MiB$/.test(s) && !s.startsWith(`${kind}: 3.0 MiB`))).toBe(true);
    expect(await page.getAttribute("#upload-progress", "hidden")).toBeNull();
    expect(await page.evaluate<number>(`document.getElementById("upload-progress").value`)).toBe(100);
    expect(prompts).toHaveLength(3); // no prompt for the uploads

    const dfsRow = page.locator(`#files-dfs li[data-name="${name}"]`);
    const ipfsRow = page.locator(`#files-ipfs li[data-name="${name}"]`);
    await dfsRow.waitFor();
    await ipfsRow.waitFor();
    const cid = (await dfsRow.getAttribute("data-cid")) as string;
    expect(await ipfsRow.getAttribute("data-cid")).toBe(cid);
    await shoot(page, "05-files-uploaded");

    // Download from dfs: byte-exact.
    const [download] = await Promise.all([page.waitForEvent("download"), dfsRow.locator('[data-action="download"]').click()]);
    expect(download.suggestedFilename()).toBe(name);
    const saved = new Uint8Array(readFileSync((await download.path()) as string));
    expect(saved.byteLength).toBe(content.byteLength);
    expect(Buffer.compare(saved, content)).toBe(0);

    // Publish from the ipfs copy: the form picks that file (no Cid or size typed), named as
    // stored, and private by default, as `stowage publish` is; here it is sold.
    await ipfsRow.locator('[data-action="publish"]').click();
    await ready(page, "directory");
    expect(await page.inputValue('#publish-form select[name="file"]')).toBe(cid);
    expect(await page.inputValue('#publish-form input[name="name"]')).toBe(name);
    expect(await page.inputValue('#publish-form select[name="access"]')).toBe("private");
    expect(await page.locator('#publish-form input[name="price"]').isHidden()).toBe(true);
    await page.selectOption('#publish-form select[name="access"]', "sold");
    await page.fill('#publish-form input[name="price"]', "5000");
    await page.fill('#publish-form input[name="keywords"]', "maps, atlas");
    await page.click('#publish-form button[type="submit"]');
    await waitStatus(page, /^Published/);
    await page.fill('#search-form input[name="query"]', "atlas");
    await until(
      "the entry in search results",
      async () => {
        await page.click('#search-form button[type="submit"]');
        await waitFor(page, `/found$/.test(document.getElementById("status").textContent)`);
        return page.locator(`#search-results li[data-mid="${cid}"]`).count();
      },
      (n) => n === 1,
      20_000,
      200,
    );
    await shoot(page, "06-directory");

    // Delete the dfs copy; the ipfs one stays.
    await page.click('nav a[href="#/files"]');
    await ready(page, "files");
    await page.locator(`#files-dfs li[data-name="${name}"] [data-action="delete"]`).click();
    await waitStatus(page, /^Deleted atlas-3mib\.bin/);
    await waitFor(page, `!document.querySelector('#files-dfs li[data-name="${name}"]')`);
    expect(await page.locator(`#files-ipfs li[data-name="${name}"]`).count()).toBe(1);
    await shoot(page, "07-files-after-delete");

    // Account: who, and points for an action.
    await page.click('nav a[href="#/account"]');
    await ready(page, "account");
    await page.click('[data-action="record-5"]');
    await waitStatus(page, /^Noted: you use this account/);
    await waitFor(page, `document.querySelector('#user-info [data-field="Points"]')?.textContent === "100"`);
    expect(await page.textContent('#user-info [data-field="DID"]')).toContain(address);
    await shoot(page, "08-account");
    // Two signatures in all, and two transactions (the deposit, the directory entry): none per file.
    expect(prompts).toEqual(["personal_sign:sign-in", "personal_sign:grant", "eth_sendTransaction", "eth_sendTransaction"]);
    expect(failures.join("\n")).toBe("");
    await context.close();
  },
  180_000,
);

test("the binary serves the console's script minified (Bun.build minify before the compile embeds it)", async () => {
  const html = await (await fetch(`${url}/console`)).text();
  const scripts = [...html.matchAll(/src="(\/console\/assets\/[^"]+\.js)"/g)].map((m) => m[1] as string);
  expect(scripts).toHaveLength(1);
  const js = await (await fetch(`${url}${scripts[0]}`)).text();
  // Syntax-only minification (the compile's own flag) left ~800 KB over ~20,000 lines.
  console.log(`console script: ${(js.length / 1024).toFixed(0)} KiB, ${js.split("\n").length} lines`);
  // Minified, the console with the SDK it uses (wallet sign-in, encryption, CAR roots) is ≈ 500 KB:
  // the size is a budget; the line count is what tells minified from syntax-only.
  expect(js.length).toBeLessThan(600_000);
  expect(js.split("\n").length).toBeLessThan(500);
});

/** Signs `page` in with its context's wallet and starts a storage session (two prompts). */
async function signInAndGrant(page: Page) {
  await page.goto(`${url}/console`);
  await page.click("#wallet-signin");
  await ready(page, "files");
  await page.click("#grant-button");
  await page.waitForSelector("#grant >> text=signs for you until");
}

test(
  "wallet: an encrypted upload (sealed in the page, opened on download, byte-exact); session keys listed and revoked, a revoked key refused at once",
  async () => {
    const { context, address, prompts } = await walletContext();
    await admin("fund", address, "2");
    const info = (await (await fetch(`${url}/chain`)).json()) as { chainId: number };
    const did = `did:ethr:0x${info.chainId.toString(16)}:${address}`;
    for (const quota of [["--space", "64MiB"], ["--traffic", "64MiB"]]) await admin("grant", "--did", did, ...quota);
    const page = await context.newPage();
    const failures: string[] = [];
    page.on("pageerror", (e) => failures.push(e.message));
    page.on("console", (m) => m.type() === "error" && !m.text().startsWith("Failed to load resource") && failures.push(m.text()));
    await signInAndGrant(page);
    expect(prompts).toEqual(["personal_sign:sign-in", "personal_sign:grant"]);

    // Encrypted, to dfs only: the wallet signs EncryptionKey twice (first use: the identity is
    // made and wrapped) and sends the transaction publishing the recipient; no prompt per file.
    const content = crypto.getRandomValues(new Uint8Array(MIB + 12_345));
    const name = "secret-notes.bin";
    await page.uncheck('#upload-form input[name="ipfs"]');
    await page.check("#upload-encrypt");
    await page.setInputFiles('#upload-form input[name="file"]', { name, mimeType: "application/octet-stream", buffer: Buffer.from(content) });
    await page.click('#upload-form button[type="submit"]');
    await waitStatus(page, /^Uploaded secret-notes\.bin to dfs, encrypted/);
    expect(prompts.slice(2)).toEqual(["eth_signTypedData_v4:EncryptionKey", "eth_signTypedData_v4:EncryptionKey", "eth_sendTransaction"]);
    const row = page.locator(`#files-dfs li[data-name="${name}"]`);
    await row.waitFor();
    // The gateway holds the age file: marked so, and larger than the plaintext (header, tags).
    expect(await row.getAttribute("data-encrypted")).toBe("age");
    expect(Number(await row.getAttribute("data-size"))).toBeGreaterThan(content.byteLength);
    expect(await row.textContent()).toContain("encrypted");
    await shoot(page, "12-files-encrypted");

    const [download] = await Promise.all([page.waitForEvent("download"), row.locator('[data-action="download"]').click()]);
    await waitStatus(page, /^Downloaded secret-notes\.bin, decrypted/);
    const saved = new Uint8Array(readFileSync((await download.path()) as string));
    expect(saved.byteLength).toBe(content.byteLength);
    expect(Buffer.compare(saved, content)).toBe(0);
    expect(prompts).toHaveLength(5); // the identity stays open for the page: no prompt to decrypt

    // A second tab: its own sign-in and session key.
    const other = await context.newPage();
    other.on("pageerror", (e) => failures.push(e.message));
    await signInAndGrant(other);
    const otherKey = (await other.textContent("#grant code")) as string;
    const ownKey = (await page.textContent("#grant code")) as string;
    expect(otherKey).not.toBe(ownKey);

    await page.click('nav a[href="#/sessions"]');
    await ready(page, "sessions");
    expect(await page.locator("#grants li[data-key]").count()).toBe(2);
    expect(await page.getAttribute("#grants li[data-here]", "data-key")).toBe(ownKey);
    await shoot(page, "13-sessions");

    // Revoke the other tab's key: gone from the list, and its next upload is refused.
    await page.locator(`#grants li[data-key="${otherKey}"] [data-action="revoke"]`).click();
    await waitStatus(page, /^Revoked 0x/);
    await waitFor(page, `document.querySelectorAll("#grants li[data-key]").length === 1`);
    await other.setInputFiles('#upload-form input[name="file"]', { name: "late.bin", mimeType: "application/octet-stream", buffer: Buffer.from("too late") });
    await other.click('#upload-form button[type="submit"]');
    await waitFor(other, `document.getElementById("status").className === "error"`);
    expect(await other.textContent("#status")).toMatch(/session key with a live grant .*revoked/);
    await shoot(other, "14-files-revoked-key");
    await shoot(page, "15-sessions-after-revoke");

    // Revoking this page's own key ends its storage session: the files page offers a new one.
    await page.locator('#grants li[data-here] [data-action="revoke"]').click();
    await waitStatus(page, /^Revoked this page's session key/);
    await waitFor(page, `document.querySelectorAll("#grants li[data-key]").length === 0`);
    await page.click('nav a[href="#/files"]');
    await ready(page, "files");
    expect(await page.locator("#grant-button").count()).toBe(1);
    expect(failures.join("\n")).toBe("");
    await context.close();
  },
  180_000,
);

test(
  "wallet: an age identity wrapped the earlier way is re-wrapped at its first unlock in the page, and encrypted files work",
  async () => {
    const { context, address, prompts, account } = await walletContext();
    await admin("fund", address, "2");
    const info = (await (await fetch(`${url}/chain`)).json()) as { chainId: number; contracts: { proxy: Hex } };
    const did = `did:ethr:0x${info.chainId.toString(16)}:${address}`;
    for (const quota of [["--space", "64MiB"], ["--traffic", "64MiB"]]) await admin("grant", "--did", did, ...quota);
    // What an earlier console left in the database: the identity wrapped under the chain-wide signature, no salt.
    const identity = generateIdentity();
    const db = new Database(join(dataDir, "stowage.db"));
    try {
      db.exec("PRAGMA busy_timeout = 10000");
      db.run("INSERT INTO age_identities (account, wrapped, updated_at) VALUES (?, ?, ?)", [address, await legacyWrapped(account, info.chainId, identity), Date.now()]);
    } finally {
      db.close();
    }
    const page = await context.newPage();
    const failures: string[] = [];
    page.on("pageerror", (e) => failures.push(e.message));
    await signInAndGrant(page);

    const content = crypto.getRandomValues(new Uint8Array(200_000));
    await page.uncheck('#upload-form input[name="ipfs"]');
    await page.check("#upload-encrypt");
    await page.setInputFiles('#upload-form input[name="file"]', { name: "rewrapped.bin", mimeType: "application/octet-stream", buffer: Buffer.from(content) });
    await page.click('#upload-form button[type="submit"]');
    await waitStatus(page, /^Uploaded rewrapped\.bin to dfs, encrypted/);
    // The old message once (to open it), the new one twice (to wrap it again), the replacement
    // request (the wallet's, not the session key's), then the recipient's publication.
    expect(prompts.slice(2)).toEqual([
      "eth_signTypedData_v4:EncryptionKey",
      "eth_signTypedData_v4:EncryptionKey",
      "eth_signTypedData_v4:EncryptionKey",
      "eth_signTypedData_v4:Request",
      "eth_sendTransaction",
    ]);
    const row = page.locator('#files-dfs li[data-name="rewrapped.bin"]');
    await row.waitFor();
    const [download] = await Promise.all([page.waitForEvent("download"), row.locator('[data-action="download"]').click()]);
    await waitStatus(page, /^Downloaded rewrapped\.bin, decrypted/);
    expect(Buffer.compare(new Uint8Array(readFileSync((await download.path()) as string)), content)).toBe(0);

    // Stored now for this deployment and a salt: the same identity, opened with the new derivation.
    const check = new Database(join(dataDir, "stowage.db"), { readonly: true });
    const stored = check.query("SELECT wrapped, salt FROM age_identities WHERE account = ?").get(address) as { wrapped: string; salt: Hex };
    check.close();
    expect(JSON.parse(stored.wrapped).v).toBe(2);
    const key = wrappingKey(normaliseSignature(await account.signTypedData(encryptionKeyTypedData(info.chainId, info.contracts.proxy, stored.salt))), stored.salt);
    expect(unwrapIdentity(stored.wrapped, key, { account: address, chainId: info.chainId, proxy: info.contracts.proxy, salt: stored.salt })).toBe(identity);
    expect(failures.join("\n")).toBe("");
    await context.close();
  },
  180_000,
);

/** The newest mail to `email` in the dev mailbox after `known`, and the code in its subject. */
async function mailedCode(email: string, known: Set<string>): Promise<string> {
  const mailDir = join(dataDir, "mail");
  const inbox = () => (existsSync(mailDir) ? readdirSync(mailDir) : []);
  const [mail] = await until("the code's mail", () => inbox().filter((f) => !known.has(f) && readFileSync(join(mailDir, f), "utf8").includes(email)), (f) => f.length === 1, 10_000);
  const code = /\b(\d{6})\b/.exec(/^Subject: .*$/m.exec(readFileSync(join(mailDir, mail as string), "utf8"))?.[0] ?? "")?.[1];
  expect(code).toMatch(/^\d{6}$/);
  return code as string;
}
const mailbox = () => new Set(existsSync(join(dataDir, "mail")) ? readdirSync(join(dataDir, "mail")) : []);

test(
  "email code: the page says where the dev mailbox wrote the code; the account links the injected wallet, uploads and downloads; the wallet's sign-in opens it",
  async () => {
    const { context, address, prompts } = await walletContext();
    const info = (await (await fetch(`${url}/chain`)).json()) as { chainId: number };
    const did = `did:ethr:0x${info.chainId.toString(16)}:${address}`;
    const page = await context.newPage();
    const failures: string[] = [];
    page.on("pageerror", (e) => failures.push(e.message));
    await page.goto(`${url}/console`);
    await page.click('button[role="tab"]:has-text("Email code")');
    const email = `reader-${Date.now()}@example.org`;
    await page.fill('#code-form input[name="email"]', email);
    const known = mailbox();
    await page.click('#code-form button[type="submit"]');
    // No SMTP here: the page names the folder the code was written to.
    await page.waitForSelector("#code-sent:not([hidden])");
    expect(await page.textContent("#code-sent")).toContain("written to a file in the mail folder of the server's data dir");
    await shoot(page, "09-sign-in-email-code-sent");
    await page.fill('#code-form input[name="code"]', await mailedCode(email, known));
    await page.click('#code-form button[type="submit"]');
    await ready(page, "account");

    // No wallet yet: the account page says what a wallet is for and offers to link one.
    expect(await page.textContent('#user-info [data-field="Email"]')).toBe(email);
    expect(await page.textContent('#user-info [data-field="DID"]')).toBe("none yet: it comes with a wallet");
    for (const page_ of ["files", "quota", "directory", "sessions"]) expect(await page.locator(`nav a[href="#/${page_}"]`).isHidden()).toBe(true);
    await page.goto(`${url}/console#/files`);
    await ready(page, "account");
    await shoot(page, "10-account-email-link-wallet");

    // The wallet's DID gets its quota before the link: the gateway reads quota records through a
    // cache of up to 1 s, so a grant made after the files page read the pools may not be seen by
    // an upload made within that second.
    for (const quota of [["--space", "64MiB"], ["--traffic", "64MiB"]]) await admin("grant", "--did", did, ...quota);
    // The wallet signs one message naming the account; the console goes on to the files.
    await page.click("#link-wallet");
    await ready(page, "files");
    await waitStatus(page, new RegExp(`^Linked wallet ${address}`));
    expect(prompts).toEqual(["personal_sign:link"]);

    await page.click("#grant-button");
    await page.waitForSelector("#grant >> text=signs for you until");
    const content = crypto.getRandomValues(new Uint8Array(300_000));
    await page.setInputFiles('#upload-form input[name="file"]', { name: "linked.bin", mimeType: "application/octet-stream", buffer: Buffer.from(content) });
    await page.click('#upload-form button[type="submit"]');
    await waitStatus(page, /^Uploaded linked\.bin to dfs$/);
    const row = page.locator('#files-dfs li[data-name="linked.bin"]');
    await row.waitFor();
    const [download] = await Promise.all([page.waitForEvent("download"), row.locator('[data-action="download"]').click()]);
    expect(Buffer.compare(new Uint8Array(readFileSync((await download.path()) as string)), content)).toBe(0);
    await shoot(page, "11-files-after-link");
    expect(prompts).toEqual(["personal_sign:link", "personal_sign:grant"]);

    await page.click('nav a[href="#/account"]');
    await ready(page, "account");
    expect(await page.textContent('#user-info [data-field="Address"]')).toBe(address);
    expect(await page.textContent('#user-info [data-field="DID"]')).toBe(did);
    const uid = await page.textContent('#user-info [data-field="User"]');
    expect(uid).toMatch(/^email:/);

    // Signed out, the wallet's own sign-in opens the same account, with the file.
    await page.click("#sign-out");
    await page.waitForSelector("#wallet-signin");
    await page.click("#wallet-signin");
    await ready(page, "files");
    await page.locator('#files-dfs li[data-name="linked.bin"]').waitFor();
    await page.click('nav a[href="#/account"]');
    await ready(page, "account");
    expect(await page.textContent('#user-info [data-field="User"]')).toBe(uid);
    expect(await page.textContent('#user-info [data-field="Email"]')).toBe(email);

    // Signed in by email again: the account has its wallet, this session acts for no DID until
    // the wallet signs (an email code proves no key); the page offers that, and the files follow.
    await page.click("#sign-out");
    await page.click('button[role="tab"]:has-text("Email code")');
    await page.fill('#code-form input[name="email"]', email);
    const before = mailbox();
    await page.click('#code-form button[type="submit"]');
    await page.fill('#code-form input[name="code"]', await mailedCode(email, before));
    await page.click('#code-form button[type="submit"]');
    await ready(page, "account");
    expect(await page.textContent('#user-info [data-field="Address"]')).toBe(address);
    expect(await page.locator('nav a[href="#/files"]').isHidden()).toBe(true);
    await shoot(page, "19-account-email-wallet-linked");
    await page.click("#wallet #wallet-signin");
    await ready(page, "files");
    await page.locator('#files-dfs li[data-name="linked.bin"]').waitFor();
    expect(prompts).toEqual(["personal_sign:link", "personal_sign:grant", "personal_sign:sign-in", "personal_sign:sign-in"]);
    expect(failures.join("\n")).toBe("");
    await context.close();
  },
  120_000,
);

test(
  "email code: a wallet that has an account of its own is not linked; the page says to sign in with it, and nothing changes",
  async () => {
    const { context, prompts } = await walletContext();
    const page = await context.newPage();
    // The wallet signs in first: its own account.
    await page.goto(`${url}/console`);
    await page.click("#wallet-signin");
    await ready(page, "files");
    await page.click('nav a[href="#/account"]');
    await ready(page, "account");
    await page.click("#sign-out");

    await page.click('button[role="tab"]:has-text("Email code")');
    const email = `second-${Date.now()}@example.org`;
    await page.fill('#code-form input[name="email"]', email);
    const known = mailbox();
    await page.click('#code-form button[type="submit"]');
    await page.fill('#code-form input[name="code"]', await mailedCode(email, known));
    await page.click('#code-form button[type="submit"]');
    await ready(page, "account");
    await page.click("#link-wallet");
    await waitFor(page, `document.getElementById("status").className === "error"`);
    expect(await page.textContent("#status")).toMatch(/already belongs to another account .*sign in with the wallet instead/);
    expect(prompts).toEqual(["personal_sign:sign-in", "personal_sign:link"]);
    await shoot(page, "20-account-link-refused");
    // Still the email account, still without a wallet, still offered the link.
    await page.reload();
    await ready(page, "account");
    expect(await page.textContent('#user-info [data-field="Address"]')).toBe("none yet");
    expect(await page.locator("#link-wallet").count()).toBe(1);
    expect(await page.textContent('#user-info [data-field="Email"]')).toBe(email);
    await context.close();
  },
  60_000,
);

test(
  "no wallet in the browser: the sign-in page and an email account's page say how to get one, or to use the command line",
  async () => {
    const context = await (browser as Browser).newContext({ viewport: { width: WIDTH, height: 844 } });
    const page = await context.newPage();
    await page.goto(`${url}/console`);
    // Without a wallet the email tab comes first; the wallet tab explains instead of failing.
    await page.waitForSelector("#code-form");
    await page.click('button[role="tab"]:has-text("Wallet")');
    await page.waitForSelector("#no-wallet");
    expect(await page.locator("#wallet-signin").count()).toBe(0);
    const guidance = (await page.textContent("#no-wallet")) ?? "";
    expect(guidance).toContain("Install a wallet extension");
    // The command line's lines, pointed at this gateway (its default is localhost:8080).
    expect(await page.textContent("#no-wallet-cli")).toBe(`export STOWAGE_GATEWAY=${url}\nexport STOWAGE_USER_KEY=$(./stowage keygen)\n./stowage put FILE`);
    expect(guidance).toContain("./stowage deposit");
    await shoot(page, "16-sign-in-no-wallet");

    await page.click('button[role="tab"]:has-text("Email code")');
    const email = `walletless-${Date.now()}@example.org`;
    await page.fill('#code-form input[name="email"]', email);
    const known = mailbox();
    await page.click('#code-form button[type="submit"]');
    await page.fill('#code-form input[name="code"]', await mailedCode(email, known));
    await page.click('#code-form button[type="submit"]');
    await ready(page, "account");
    expect(await page.locator("#link-wallet").count()).toBe(0);
    expect(await page.textContent("#wallet #no-wallet")).toContain("Install a wallet extension");
    await shoot(page, "17-account-no-wallet");
    await context.close();
  },
  60_000,
);

test(
  "password: an account registered through the account API signs in on the password tab",
  async () => {
    const email = `writer-${Date.now()}@example.org`;
    const password = "correct horse battery";
    const mailDir = join(dataDir, "mail");
    const inbox = () => (existsSync(mailDir) ? readdirSync(mailDir) : []);
    const known = new Set(inbox());
    const post = (path: string, body: unknown) => fetch(`${url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    expect((await post("/v2/login/email/code", { email })).status).toBe(200);
    const [mail] = await until("the code's mail", () => inbox().filter((f) => !known.has(f) && readFileSync(join(mailDir, f), "utf8").includes(email)), (f) => f.length === 1, 10_000);
    const code = /\b(\d{6})\b/.exec(/^Subject: .*$/m.exec(readFileSync(join(mailDir, mail as string), "utf8"))?.[0] ?? "")?.[1];
    expect((await post("/v2/login/email/register", { email, code, password, source: "test" })).status).toBe(200);

    const context = await (browser as Browser).newContext({ viewport: { width: WIDTH, height: 844 } });
    const page = await context.newPage();
    await page.goto(`${url}/console`);
    await page.click('button[role="tab"]:has-text("Password")');
    await page.fill('#password-form input[name="email"]', email);
    await page.fill('#password-form input[name="password"]', password);
    await shoot(page, "18-sign-in-password");
    await page.click('#password-form button[type="submit"]');
    await ready(page, "account");
    expect(await page.textContent('#user-info [data-field="Email"]')).toBe(email);
    await context.close();
  },
  60_000,
);

test("the compiled binary answers the page with its policy (kept beside the screenshots)", async () => {
  // dist/stowage carries the bundle inside (page.files, read from its own file system); run from
  // source, the plugin bundles at the first request instead (test/console/serve.test.ts).
  const res = await fetch(`${url}/console`);
  expect(res.headers.get("content-security-policy")).toContain("script-src 'self'");
  writeFileSync(join(shots, "console.html"), await res.text());
});
