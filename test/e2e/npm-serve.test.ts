/**
 * D14: SIGTERM to `npm run serve` (the README's start command) stops the server and its chain,
 * and frees the data dir for the next start. npm forwards the signal to its child only, so every
 * script between npm and Bun must `exec`. Both ways scripts/bun.sh finds Bun are run: a `bun` on
 * PATH, and none (Bun fetched through npx, whose own `sh -c` would swallow the signal). And the
 * README's `./stowage` runs the command line with nothing but Node.js and npm on PATH, from any
 * folder and through a symlink, with no npm at all once Bun is there; `npm exec stowage` too.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { delimiter, join } from "node:path";
import type { Subprocess } from "bun";
import { anvilsOf } from "../support/binary.ts";
import { descendants } from "../support/procs.ts";
import { tempDir } from "../support/tmp.ts";

const ROOT = join(import.meta.dir, "..", "..");
/** npm install check, chain start and deploy: give a slow machine room. */
const timeout = 120_000;

const argv = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  } catch {
    return [];
  }
};
const cmdline = (pid: number) => argv(pid).join(" ");
/** The Bun process running the server (not a shell whose command line names it). */
const isServer = (pid: number) => {
  const [exe, ...rest] = argv(pid);
  return /(^|\/)bun(\.exe)?$/.test(exe ?? "") && rest.includes("src/main.ts");
};
/** Still there (a zombie nobody reaps counts: it still holds its pid). */
const exists = (pid: number) => existsSync(`/proc/${pid}`);

/** PATH without any folder that holds a `bun`; with `bun` (this test's own, the pinned one) first when asked. */
function pathFor(withBun: boolean): string {
  const dirs = (process.env.PATH ?? "").split(delimiter).filter((d) => d && !existsSync(join(d, "bun")));
  if (withBun) {
    const dir = join(tempDir("bun-path"), "bin");
    mkdirSync(dir);
    symlinkSync(process.execPath, join(dir, "bun"));
    dirs.unshift(dir);
  }
  return dirs.join(delimiter);
}

/** Every npm this file started, with what ran under it (pid → command line), for the clean-up
 * after a failed test: a server killed first would leave its chain out of reach of the walk. */
const started: { npm: Subprocess; seen: Map<number, string>; dataDir: string }[] = [];
afterEach(() => {
  for (const { npm, seen, dataDir } of started.splice(0)) {
    for (const pid of descendants(npm.pid)) seen.set(pid, cmdline(pid));
    // A pid is killed only while it still runs what was seen (never a reused one).
    const doomed = [...seen].filter(([pid, line]) => exists(pid) && cmdline(pid) === line).map(([pid]) => pid);
    for (const pid of [...doomed, ...anvilsOf(dataDir)]) process.kill(pid, "SIGKILL");
    npm.kill("SIGKILL");
  }
});

async function serve(dataDir: string, path: string): Promise<{ npm: Subprocess<"ignore", "pipe", "pipe">; output: () => string }> {
  const npm = Bun.spawn(["npm", "run", "serve"], {
    cwd: ROOT,
    env: {
      PATH: path,
      HOME: process.env.HOME ?? "/root",
      STOWAGE_DATA_DIR: dataDir,
      STOWAGE_PORT: "0",
      STOWAGE_HOST: "127.0.0.1",
      STOWAGE_IPFS_LISTEN: "/ip4/127.0.0.1/tcp/0",
      // Free ports for the side listeners: the defaults (9464, 9000) may be taken on a test machine.
      STOWAGE_METRICS_LISTEN: "127.0.0.1:0",
      STOWAGE_S3_API_PORT: "0",
    },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const entry = { npm, seen: new Map<number, string>(), dataDir };
  const note = () => {
    for (const pid of descendants(npm.pid)) entry.seen.set(pid, cmdline(pid));
  };
  started.push(entry);
  let out = "";
  const collect = async (stream: ReadableStream<Uint8Array>) => {
    for await (const chunk of stream) out += new TextDecoder().decode(chunk);
  };
  void collect(npm.stdout);
  void collect(npm.stderr);
  const deadline = Date.now() + 90_000;
  while (!out.includes("stowage listening on")) {
    if (npm.exitCode !== null || Date.now() > deadline) throw new Error(`npm run serve did not start (exit ${npm.exitCode}):\n${out}`);
    note();
    await Bun.sleep(50);
  }
  note();
  return { npm, output: () => out };
}

const parentOf = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
};

/** SIGTERM to npm alone, as a supervisor or `kill` would send it: nothing it started may remain. */
async function stopAndCheck(run: Awaited<ReturnType<typeof serve>>, dataDir: string): Promise<void> {
  const tree = descendants(run.npm.pid);
  expect(tree.filter(isServer).length).toBe(1);
  run.npm.kill("SIGTERM");
  const deadline = Date.now() + 10_000;
  while ([run.npm.pid, ...tree].some(exists) && Date.now() < deadline) await Bun.sleep(50);
  expect([run.npm.pid, ...tree].filter(exists).map((pid) => `${pid} ${cmdline(pid)}`)).toEqual([]);
  expect(anvilsOf(dataDir)).toEqual([]);
  expect(run.output()).toContain('"msg":"stopping","signal":"SIGTERM"');
}

describe.each([
  ["bun on PATH", true],
  ["bun through npx", false],
] as const)("npm run serve, %s", (_label, withBun) => {
  test("SIGTERM to npm stops the server and its chain at once, and the data dir starts again", async () => {
    const dataDir = join(tempDir("npm-serve"), "data");
    const path = pathFor(withBun);
    // scripts/bun.sh remembers where npx's Bun is: forget it, so that npx is asked here.
    if (!withBun) rmSync(join(ROOT, "node_modules", ".cache", `stowage-bun-${/BUN_VERSION=(\S+)/.exec(readFileSync(join(ROOT, "scripts", "bun.sh"), "utf8"))?.[1]}`), { force: true });
    const first = await serve(dataDir, path);
    const [server] = descendants(first.npm.pid).filter(isServer);
    const serverParent = parentOf(server as number);
    await stopAndCheck(first, dataDir);
    // Bun was npm's own child: no shell or npx in between to swallow the signal.
    expect(serverParent).toBe(first.npm.pid);

    const second = await serve(dataDir, path);
    expect(second.output()).not.toContain("another stowage");
    await stopAndCheck(second, dataDir);
  }, timeout);
});

/** Runs `cmd` with only `PATH` (and HOME): its stdout, stderr and exit code. */
async function runWith(cmd: string[], cwd: string, PATH: string) {
  const proc = Bun.spawn(cmd, { cwd, env: { PATH, HOME: process.env.HOME ?? "/root" }, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { out, err, code };
}

test("`./stowage` runs the command line with only Node.js and npm, from the clone, another folder or a symlink; `npm exec stowage` too (README)", async () => {
  const elsewhere = tempDir("launcher");
  const link = join(elsewhere, "stowage");
  symlinkSync(join(ROOT, "stowage"), link);
  for (const [cmd, cwd] of [
    [["./stowage", "--help"], ROOT],
    [[join(ROOT, "stowage"), "--help"], elsewhere],
    [[link, "--help"], elsewhere],
    [["npm", "exec", "--no-install", "stowage", "--", "--help"], ROOT],
  ] as const) {
    const r = await runWith([...cmd], cwd, pathFor(false));
    expect(r.err, cmd.join(" ")).not.toContain("No such file");
    expect(r.code, `${cmd.join(" ")}: ${r.err}`).toBe(0);
    expect(r.out).toContain("Usage: stowage <command>");
  }
}, timeout);

test("`./stowage` needs no npm once the pinned Bun is on PATH: nothing but sh, dirname, readlink and Bun", async () => {
  const bin = join(tempDir("launcher-path"), "bin");
  mkdirSync(bin);
  for (const tool of ["/bin/sh", "/usr/bin/dirname", "/usr/bin/readlink", "/usr/bin/cat"]) symlinkSync(tool, join(bin, tool.split("/").pop() as string));
  symlinkSync(process.execPath, join(bin, "bun"));
  const r = await runWith(["./stowage", "--version"], ROOT, bin);
  expect(r.code, r.err).toBe(0);
  expect(r.out.trim()).toBe(JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version);
}, timeout);
