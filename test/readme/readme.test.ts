/**
 * The README's commands run as written (D19): a newcomer with a fresh clone, Node.js and
 * npm pastes them and they work. Blocks marked `<!-- test: run -->` right before their fence are
 * taken out of README.md and run against the compiled server on a fresh data dir, in the README's
 * order as one `bash -e -o pipefail` session, as a reader goes through them in one terminal with
 * one key (what one exports, the next has), in the clone's folder (where the README says to run
 * them, so `./stowage` is the clone's own launcher); code blocks with Bun as the README says (`sh
 * scripts/bun.sh`); all with a PATH that holds node, npm, a shell and coreutils only: no Bun, no
 * curl, no jq. Nothing in a block is replaced; the test gives only what the README tells a reader
 * to set for a gateway that is not theirs on localhost:8080 and a data dir that is not ./data
 * (STOWAGE_GATEWAY, STOWAGE_DATA_DIR). Blocks that need
 * infrastructure a test cannot have (a remote chain, /var/lib, three gateways, aws-cli) stay
 * unmarked, and the sections that must be run are checked to be marked, so they cannot drop out.
 */
import { afterAll, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { startBinary, type RunningBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";

const ROOT = join(import.meta.dir, "..", "..");
const README = readFileSync(join(ROOT, "README.md"), "utf8");
const MARK = "<!-- test: run -->";
/** Sections whose blocks a reader runs as they are: each must hold a marked block of this language. */
const MUST_RUN: [section: string, lang: string][] = [
  ["Using it from a shell", "sh"],
  ["Using S3 tools", "sh"],
  ["Using it from code", "ts"],
];

interface Block {
  section: string;
  lang: string;
  code: string;
  run: boolean;
  line: number;
}

/** The fenced blocks of a Markdown text, with the heading they stand under and their mark. */
function blocksOf(md: string): Block[] {
  const lines = md.split("\n");
  const blocks: Block[] = [];
  let section = "";
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    const heading = /^#{1,6} (.*)$/.exec(line);
    if (heading) section = (heading[1] as string).trim();
    const fence = /^```(\S*)\s*$/.exec(line);
    if (!fence) {
      // A mark that no fence follows would leave its block unrun without a word.
      if (line.trim() === MARK && !/^```\S/.test(lines[i + 1] ?? "")) throw new Error(`README.md:${i + 1}: ${MARK} must stand right before a block's fence`);
      continue;
    }
    const end = lines.indexOf("```", i + 1);
    if (end < 0) throw new Error(`README.md:${i + 1}: unclosed block`);
    blocks.push({ section, lang: fence[1] as string, code: lines.slice(i + 1, end).join("\n") + "\n", run: lines[i - 1]?.trim() === MARK, line: i + 1 });
    i = end;
  }
  return blocks;
}

const blocks = blocksOf(README);
const marked = blocks.filter((b) => b.run);

/** A folder holding node, npm, npx, sh, bash and Debian's coreutils, and nothing else: a machine
 * with Node.js and npm. */
function plainPath(): string {
  const bin = join(tempDir("readme-path"), "bin");
  mkdirSync(bin);
  const coreutils = execFileSync("dpkg-query", ["-L", "coreutils"], { encoding: "utf8" })
    .split("\n")
    .filter((p) => /^\/(usr\/)?bin\/[^/]+$/.test(p));
  const tools = [...coreutils, "/usr/bin/node", "/usr/bin/npm", "/usr/bin/npx", "/bin/sh", "/bin/bash"];
  for (const tool of tools) {
    try {
      symlinkSync(tool, join(bin, basename(tool)));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
  }
  return bin;
}

async function run(cmd: string[], stdin: string, env: Record<string, string>) {
  const proc = Bun.spawn(cmd, { cwd: ROOT, env: { HOME: process.env.HOME ?? "/root", ...env }, stdin: new Blob([stdin]), stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { stdout, stderr, code };
}

/** The marked blocks in the README's order as one shell session, from a file, not stdin (a
 * command that reads its stdin would eat the rest), as a reader goes through them in one terminal
 * with one key: the shell blocks as they are, each code block saved to a file and run with Bun as
 * the README says. Each block says on stderr where it starts, so a failure names it. */
function session(env: Record<string, string>) {
  const dir = tempDir("readme-sh");
  const steps = marked.map((b, i) => {
    const where = `echo ${JSON.stringify(`## README.md:${b.line} (${b.section})`)} >&2\n`;
    if (b.lang === "sh") return where + b.code;
    // `sh scripts/bun.sh example.ts` of a file saved in the clone: the same, from the file on stdin
    // (in the clone's folder, so its imports of ./src/sdk resolve), with the session's environment.
    const file = join(dir, `example-${i}.ts`);
    writeFileSync(file, b.code);
    return `${where}sh scripts/bun.sh run - < ${JSON.stringify(file)}\n`;
  });
  const script = join(dir, "session.sh");
  writeFileSync(script, steps.join(""));
  return run(["bash", "-e", "-o", "pipefail", script], "", env);
}

let server: RunningBinary | undefined;
afterAll(async () => {
  await server?.stop();
});

test("the sections a reader runs as written are marked to run, and every marked block is one this test runs", () => {
  for (const [section, lang] of MUST_RUN) {
    expect(marked.filter((b) => b.section === section && b.lang === lang).length, `a ${MARK} \`\`\`${lang} block in "${section}"`).toBeGreaterThan(0);
  }
  for (const b of marked) expect(["sh", "ts"], `README.md:${b.line}`).toContain(b.lang);
  // Placeholders cannot run: a marked block holds none (outside its comments).
  const code = (b: Block) => b.code.replace(/(^|\s)(#|\/\/).*$/gm, "");
  for (const b of marked) expect(code(b), `README.md:${b.line}`).not.toMatch(/…|0xUSER|PASSWORD/);
  // The command line as the clone has it: `./stowage`, never npx (a second or more of npm per
  // command, and outside the clone a lookup of the public registry) nor a bare name no machine has.
  const shell = marked.filter((b) => b.lang === "sh");
  for (const b of shell) expect(code(b), `README.md:${b.line}`).not.toMatch(/(?:^|\$\(|[|;&]\s*)(?:npx\s+|npm\s+exec\s+)?stowage\b/m);
  expect(shell.some((b) => /^\.\/stowage /m.test(b.code))).toBe(true);
});

test("the marked blocks run as written against a fresh server, with only Node.js and npm", async () => {
  const dataDir = join(tempDir("readme"), "data");
  // Metrics on a free port: another server on the machine may hold the default one.
  server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir], { STOWAGE_METRICS_LISTEN: "127.0.0.1:0" });
  const PATH = plainPath();
  // What the README tells a reader to set when the gateway is not localhost:8080 and its data dir not ./data.
  const reader = { PATH, STOWAGE_GATEWAY: server.url, STOWAGE_DATA_DIR: dataDir };

  const sh = await session(reader);

  expect(sh.code, `a README block failed:\n${sh.stderr}`).toBe(0);
  // The ranged get printed the start of the file put from the clone, rm removed the dfs copy,
  // and the search after `publish --wait` found the entry (a search that finds nothing prints
  // nothing on stdout and still exits 0). That --wait waits is tested where the indexer moves
  // only when told: test/directory/wait.test.ts. Then an S3 access key was made.
  expect(sh.stdout).toContain(README.slice(0, 100));
  expect(sh.stdout).toMatch(/removed \d+\n/);
  expect(sh.stdout).toMatch(/^README\.md +\S+ KiB +5000 gwei +stowage +0x[0-9a-fA-F]{40} +\S+$/m);
  expect(sh.stdout).toMatch(/^access key id +STW\S+$/m);
  // The code, with the same key: its note read back, found by search, and bought by a reader.
  expect(sh.stdout).toContain("A note from ");
  expect(sh.stdout).toContain('"A note"');
  expect(sh.stdout).toContain("reader may read: true");
}, 240_000);
