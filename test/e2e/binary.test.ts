/**
 * The compiled binary, run as an operator would: empty data dir, no Bun on PATH, signals.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BINARY, runBinary, startBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";

interface Health {
  status: string;
  components: { database: { installation: string } };
}
const health = async (url: string) => (await (await fetch(`${url}/healthz`)).json()) as Health;

/** A process's state letter in /proc (R, S, Z for a zombie…), or undefined once it is gone. */
function procState(pid: number): string | undefined {
  try {
    return /^\d+ \(.*\) (\S)/.exec(readFileSync(`/proc/${pid}/stat`, "utf8"))?.[1];
  } catch {
    return undefined;
  }
}

async function until(ok: () => boolean, ms: number) {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms`);
    await Bun.sleep(20);
  }
}

async function firstLine(stream: ReadableStream<Uint8Array>): Promise<string> {
  let text = "";
  for await (const chunk of stream) {
    text += new TextDecoder().decode(chunk);
    if (text.includes("\n")) break;
  }
  return text.split("\n")[0] ?? "";
}

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

  test("a busy port stops the start before anything starts: each listener's setting named with a way out, all at once, exit 2", async () => {
    const { createServer } = await import("node:net");
    const hold = async (host: string) => {
      const server = createServer();
      await new Promise<void>((ok) => server.listen({ host, port: 0 }, ok));
      return { port: (server.address() as { port: number }).port, close: () => new Promise<void>((ok) => server.close(() => ok())) };
    };
    const [a, b, c, d] = [await hold("0.0.0.0"), await hold("0.0.0.0"), await hold("127.0.0.1"), await hold("0.0.0.0")];
    try {
      const cases: [string[], RegExp][] = [
        [["--port", String(a.port)], new RegExp(`the HTTP API cannot listen on 0\\.0\\.0\\.0:${a.port} \\(STOWAGE_PORT / --port\\): the port is in use; pick another, such as --port ${a.port + 1}`)],
        [["--s3-api-port", String(b.port)], /the S3 API .*\(STOWAGE_S3_API_PORT \/ --s3-api-port\).*--s3-api-port 0/],
        [["--metrics-listen", `127.0.0.1:${c.port}`], /the metrics listener .*\(STOWAGE_METRICS_LISTEN \/ --metrics-listen\).*--metrics-listen off/],
        [["--ipfs-listen", `/ip4/0.0.0.0/tcp/${d.port}`], new RegExp(`the IPFS node .*\\(STOWAGE_IPFS_LISTEN / --ipfs-listen\\).*--ipfs-listen /ip4/0\\.0\\.0\\.0/tcp/${d.port + 1}`)],
      ];
      /** Every listener on a free port (or off) but those `flags` name. */
      const freeBut = (flags: string[]) => {
        const free: Record<string, string> = { "--port": "0", "--s3-api-port": "0", "--metrics-listen": "off", "--ipfs-listen": "/ip4/127.0.0.1/tcp/0" };
        for (let i = 0; i < flags.length; i += 2) free[flags[i] as string] = flags[i + 1] as string;
        return Object.entries(free).flat();
      };
      for (const [flags, message] of cases) {
        const dataDir = join(tempDir("ports"), "data");
        const started = Date.now();
        const r = await runBinary(["serve", "--data-dir", dataDir, ...freeBut(flags)]);
        expect(r.code).toBe(2);
        expect(r.stderr).toMatch(message);
        // Nothing started: no data dir was made (so no chain, no anvil copied out, no database).
        expect(existsSync(dataDir)).toBe(false);
        expect(Date.now() - started).toBeLessThan(5_000);
      }
      // All at once, in one message.
      const all = await runBinary(["serve", "--data-dir", join(tempDir("ports"), "data"), "--port", String(a.port), "--s3-api-port", String(b.port), "--metrics-listen", `127.0.0.1:${c.port}`, "--ipfs-listen", `/ip4/0.0.0.0/tcp/${d.port}`]);
      expect(all.code).toBe(2);
      for (const setting of ["--port)", "--s3-api-port)", "--metrics-listen)", "--ipfs-listen)"]) expect(all.stderr).toContain(setting);
      // Two of its own listeners on one port are named too.
      const same = await runBinary(["serve", "--data-dir", join(tempDir("ports"), "data"), ...freeBut(["--metrics-listen", `127.0.0.1:${a.port + 7}`, "--ipfs-listen", `/ip4/0.0.0.0/tcp/${a.port + 7}`])]);
      expect(same.code).toBe(2);
      expect(same.stderr).toContain("wants the same port");
    } finally {
      for (const h of [a, b, c, d]) await h.close();
    }
  }, timeout);

  test("an unknown command exits 2 with one line and where to look, not the whole help", async () => {
    const r = await runBinary(["frobnicate"]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split("\n")).toEqual(['stowage: unknown command "frobnicate"', "See: stowage --help"]);
    expect(r.stdout).toBe("");
  }, timeout);

  test("each admin command has its own --help: usage, what it does, its options", async () => {
    const options: Record<string, string[]> = {
      grant: ["--did DID", "--space BYTES", "--traffic BYTES", "--days N", "--data-dir DIR", "can only lengthen"],
      prices: ["--space WEI", "--traffic WEI", "--data-dir DIR"],
      fund: ["ADDRESS", "AMOUNT_ETH", "Embedded chain only", "--data-dir DIR"],
      block: ["--reason TEXT", "410", "--data-dir DIR"],
      unblock: ["CID[/PATH]", "--data-dir DIR"],
      blocked: ["--all", "--json", "--data-dir DIR"],
    };
    for (const [sub, words] of Object.entries(options)) {
      const r = await runBinary(["admin", sub, "--help"]);
      expect(r.code).toBe(0);
      expect(r.stdout).toStartWith(`Usage: stowage admin ${sub} `);
      expect(r.stdout).not.toContain("stowage admin <command> --help tells more");
      for (const word of words) expect(r.stdout, `admin ${sub} --help`).toContain(word);
    }
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
    expect(clash.stderr).toContain(`another stowage (pid ${first.proc.pid}) is using ${dataDir}`);

    const t0 = performance.now();
    expect(await first.stop("SIGTERM")).toBe(0);
    expect(performance.now() - t0).toBeLessThan(10_000);
    expect(first.output()).toMatch(/"msg":"request".*"path":"\/healthz".*"status":200/);

    const second = await startBinary(args);
    const h2 = await health(second.url);
    expect(h2.components.database.installation).toBe(h1.components.database.installation);
    expect(await second.stop("SIGINT")).toBe(0);
  }, timeout);

  test("the data dir's anvil is copied out by a child process and checked against the hash taken at build time: a good copy is left alone, a changed one replaced, and the embedded 44 MiB never resident in the server", async () => {
    const dataDir = join(tempDir("bin-anvil"), "data");
    const args = ["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir];
    const anvil = join(dataDir, "bin", "anvil");
    const packaged = new Bun.CryptoHasher("sha256").update(readFileSync(Bun.resolveSync("@foundry-rs/anvil-linux-amd64/bin/anvil", import.meta.dir))).digest("hex");
    const hashOf = (path: string) => new Bun.CryptoHasher("sha256").update(readFileSync(path)).digest("hex");
    // File-backed resident pages: the binary's own (code, and the embedded files read), not the heap.
    const rssFileMiB = (pid: number) => Number(/RssFile:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]) / 1024;

    // The first start copies the embedded anvil out, in a child process: its pages stay out of the server's RSS.
    const first = await startBinary(args);
    expect((await health(first.url)).status).toBe("ok");
    const rssFirst = rssFileMiB(first.proc.pid);
    expect(await first.stop("SIGTERM")).toBe(0);
    expect(hashOf(anvil)).toBe(packaged);
    expect(statSync(anvil).mode & 0o777).toBe(0o700);
    expect(rssFirst).toBeLessThan(80); // ≈ 55 MiB; ≈ 99 when the server copied it itself
    const copied = statSync(anvil);

    // Reading the embedded 44 MiB (to hash it, as every start did) kept its pages resident.
    const again = await startBinary(args);
    expect((await health(again.url)).status).toBe("ok");
    const rss = rssFileMiB(again.proc.pid);
    expect(await again.stop("SIGTERM")).toBe(0);
    expect(statSync(anvil).ino).toBe(copied.ino);
    expect(rss).toBeLessThan(80); // ≈ 61 MiB; 104 when the embedded anvil was hashed at start

    writeFileSync(anvil, "#!/bin/sh\nexit 1\n", { mode: 0o700 });
    const repaired = await startBinary(args);
    expect((await health(repaired.url)).status).toBe("ok");
    expect(await repaired.stop("SIGTERM")).toBe(0);
    expect(hashOf(anvil)).toBe(packaged);
  }, timeout);

  test("restarted right after kill -9 it starts at once, even while the killed pid is not yet reaped (D14)", async () => {
    const work = tempDir("bin");
    const dataDir = join(work, "data");
    const args = ["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir];
    // A parent that never reaps (as a supervisor may be slow to): the killed server stays a
    // zombie, whose pid still answers kill(pid, 0). Only a kernel lock is free at once.
    const firstLog = join(work, "first.log");
    const parent = Bun.spawn(["sh", "-c", '"$0" "$@" >"$LOG" 2>&1 & echo $!; exec sleep 600', BINARY, ...args], {
      env: { HOME: "/tmp", STOWAGE_IPFS_LISTEN: "/ip4/127.0.0.1/tcp/0", STOWAGE_METRICS_LISTEN: "off", STOWAGE_S3_API_PORT: "0", LOG: firstLog },
      stdout: "pipe",
    });
    try {
      const pid = Number(await firstLine(parent.stdout));
      await until(() => existsSync(firstLog) && readFileSync(firstLog, "utf8").includes("stowage listening on"), 30_000);
      const firstUrl = /stowage listening on (http:\/\/\S+)/.exec(readFileSync(firstLog, "utf8"))?.[1] as string;
      const id = (await health(firstUrl)).components.database.installation;
      process.kill(pid, "SIGKILL");
      await until(() => procState(pid) === "Z", 5_000);
      expect(readFileSync(join(dataDir, "stowage.lock"), "utf8")).toBe(String(pid));

      const second = await startBinary(args);
      expect((await health(second.url)).components.database.installation).toBe(id);
      expect(procState(pid)).toBe("Z"); // still unreaped: the pid in the file decided nothing
      expect(await second.stop()).toBe(0);
    } finally {
      parent.kill("SIGKILL");
    }
  }, timeout);
});
