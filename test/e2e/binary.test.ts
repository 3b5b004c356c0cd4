/**
 * The compiled binary, run as an operator would: empty data dir, no Bun on PATH, signals.
 */
import { describe, expect, test } from "bun:test";
import { statSync } from "node:fs";
import { join } from "node:path";
import { runBinary, startBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";

interface Health {
  status: string;
  components: { database: { installation: string } };
}
const health = async (url: string) => (await (await fetch(`${url}/healthz`)).json()) as Health;

/** Each start also starts the embedded chain; give a slow machine room. */
const timeout = 60_000;

describe("stowage binary", () => {
  test("--help lists commands and every setting; serve --help too", async () => {
    const top = await runBinary(["--help"]);
    expect(top.code).toBe(0);
    expect(top.stdout).toContain("serve");
    for (const name of ["STOWAGE_PORT", "STOWAGE_DATA_DIR", "STOWAGE_CHAIN_RPC", "ADMIN_ADDRESSES"]) expect(top.stdout).toContain(name);
    const serve = await runBinary(["serve", "--help"]);
    expect(serve.code).toBe(0);
    expect(serve.stdout).toContain("--data-dir");
  }, timeout);

  test("a bad setting exits 2 with a clear message", async () => {
    const r = await runBinary(["serve", "--port", "nope"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--port: must be a non-negative integer");
    const env = await runBinary(["serve"], { STOWAGE_MAX_BODY: "huge" });
    expect(env.code).toBe(2);
    expect(env.stderr).toContain("STOWAGE_MAX_BODY");
  }, timeout);

  test("an unknown command exits 2", async () => {
    expect((await runBinary(["frobnicate"])).code).toBe(2);
  }, timeout);

  test("starts on an empty data dir, serves, stops on SIGTERM with 0, keeps its data across restarts", async () => {
    const dataDir = join(tempDir("bin"), "data");
    const args = ["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir];
    const first = await startBinary(args);
    const h1 = await health(first.url);
    expect(h1.status).toBe("ok");
    expect(statSync(join(dataDir, "secrets")).mode & 0o777).toBe(0o700);
    expect(statSync(join(dataDir, "secrets", "jwt.key")).mode & 0o777).toBe(0o600);

    // A second server on the same data dir is refused while the first runs.
    const clash = await runBinary(args);
    expect(clash.code).toBe(1);
    expect(clash.stderr).toContain("another stowage");

    const t0 = performance.now();
    expect(await first.stop("SIGTERM")).toBe(0);
    expect(performance.now() - t0).toBeLessThan(10_000);
    expect(first.output()).toMatch(/"msg":"request".*"path":"\/healthz".*"status":200/);

    const second = await startBinary(args);
    const h2 = await health(second.url);
    expect(h2.components.database.installation).toBe(h1.components.database.installation);
    expect(await second.stop("SIGINT")).toBe(0);
  }, timeout);

  test("after kill -9 the next start takes over the stale lock", async () => {
    const dataDir = join(tempDir("bin"), "data");
    const args = ["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir];
    const first = await startBinary(args);
    const id = (await health(first.url)).components.database.installation;
    await first.stop("SIGKILL");
    const second = await startBinary(args);
    expect((await health(second.url)).components.database.installation).toBe(id);
    expect(await second.stop()).toBe(0);
  }, timeout);
});
