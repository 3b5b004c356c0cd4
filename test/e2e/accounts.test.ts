/**
 * The account API of the compiled binary, used the way a client would: the SDK over real HTTP,
 * settings from the environment, the dev mailbox on disk.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createAccountClient } from "../../src/sdk/account.ts";
import { startBinary, type RunningBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";

const APP_ORIGIN = "https://app.stowage.test";
const admin = privateKeyToAccount(generatePrivateKey());

let server: RunningBinary;
let dataDir: string;

beforeAll(async () => {
  dataDir = join(tempDir("e2e-accounts"), "data");
  server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir], {
    STOWAGE_ALLOWED_ORIGINS: `http://localhost:8080,${APP_ORIGIN}`,
    ADMIN_ADDRESSES: admin.address.toLowerCase(),
    STOWAGE_RENEWAL_DAYS: "30",
  });
});
afterAll(async () => {
  if (server) expect(await server.stop()).toBe(0);
});

describe("account API of the binary", () => {
  test("EVM login with the SDK, me, user info, record 5 then 6, refresh", async () => {
    const client = createAccountClient({ baseUrl: server.url, origin: APP_ORIGIN, source: "e2e" });
    const key = privateKeyToAccount(generatePrivateKey());
    const login = await client.loginWithEvmAccount(key);
    expect(login.did).toBe(`did:ethr:0x3d9:${key.address}`);
    expect(Number(login.number)).toBeGreaterThanOrEqual(100001);

    expect(await client.me()).toEqual({ uid: key.address, role: "user" });
    const info = await client.userInfo();
    expect(info).toMatchObject({ address: key.address, did: login.did, points: 0, social_info: false });

    await client.addRecord(5);
    const five = await client.getRecord(5);
    expect(five).toMatchObject({ action: 5, points: 100 });
    expect(Math.abs(five!.time - Date.now() / 1000)).toBeLessThan(60);
    await client.addRecord(6);
    expect(await client.getRecord(6)).toMatchObject({ action: 6, points: 50 });
    expect((await client.userInfo()).points).toBe(150);
    // Once only, and a renewal only every 30 days.
    await expect(client.addRecord(5)).rejects.toMatchObject({ error: "USER_ADD_ACTION_FAILED" });
    await expect(client.addRecord(6)).rejects.toMatchObject({ error: "VERIFY_ACTION_FAILED" });

    const before = client.tokens!;
    const refreshed = await client.refresh();
    expect(refreshed.accessToken).not.toBe(before.accessToken);
    expect(refreshed.refreshToken).not.toBe(before.refreshToken);
    expect((await client.me()).uid).toBe(key.address);

    // The same key later is the same account.
    const again = createAccountClient({ baseUrl: server.url, origin: APP_ORIGIN });
    expect((await again.loginWithEvmAccount(key)).number).toBe(login.number);
  });

  test("ADMIN_ADDRESSES from the environment makes that address admin", async () => {
    const client = createAccountClient({ baseUrl: server.url, origin: APP_ORIGIN });
    await client.loginWithEvmAccount(admin);
    expect((await client.me()).role).toBe("admin");
  });

  test("an origin outside STOWAGE_ALLOWED_ORIGINS gets no challenge", async () => {
    const client = createAccountClient({ baseUrl: server.url, origin: "https://evil.test" });
    await expect(client.loginWithEvmAccount(privateKeyToAccount(generatePrivateKey()))).rejects.toMatchObject({ status: 403, error: "FORBIDDEN" });
  });

  test("email code through the dev mailbox in DATA_DIR/mail", async () => {
    const client = createAccountClient({ baseUrl: server.url });
    await client.sendEmailCode("e2e@example.com");
    const mailDir = join(dataDir, "mail");
    const newest = readdirSync(mailDir).sort().at(-1)!;
    const code = /^Subject: Your Stowage code: (\d{6})$/m.exec(readFileSync(join(mailDir, newest), "utf8"))?.[1];
    expect(code).toMatch(/^\d{6}$/);
    await client.loginWithEmailCode("e2e@example.com", code!);
    expect((await client.me()).email).toBe("e2e@example.com");
    // The code went to the mailbox, never to the log.
    expect(server.output()).not.toContain(code!);
  });
});
