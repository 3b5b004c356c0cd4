/**
 * What the compiled binary prints and serves cites no design or issue number
 * (test/support/citations.ts): every `--help` (the main one, each command's, each admin
 * subcommand's) and every text of the OpenAPI document it serves (summaries, descriptions, schema
 * descriptions, at any depth). test/unit/user-text.test.ts reads the sources; this reads text put
 * together at run time as a user meets it.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { runBinary, startBinary } from "../support/binary.ts";
import { citing } from "../support/citations.ts";
import { tempDir } from "../support/tmp.ts";

/** `stowage … --help`, which must succeed. */
async function help(...args: string[]): Promise<string> {
  const r = await runBinary([...args, "--help"]);
  expect(r.code, `stowage ${args.join(" ")} --help: ${r.stderr}`).toBe(0);
  return r.stdout;
}

test("no --help of the binary cites a design or issue number", async () => {
  const main = await help();
  const commands = (/^Commands:\n([\s\S]*?)\n\n/m.exec(main)?.[1] ?? "").split("\n").map((l) => l.trim().split(/\s+/)[0] as string).filter((c) => c && c !== "help");
  expect(commands).toContain("serve");
  expect(commands).toContain("put");
  const admin = await help("admin");
  const subcommands = (/^Usage: stowage admin <([^>]+)>/m.exec(admin)?.[1] ?? "").split("|").map((s) => s.trim());
  expect(subcommands).toContain("backup");
  const runs = [...commands.map((c) => [c]), ...subcommands.map((s) => ["admin", s])];
  const texts: [string, string][] = [["stowage --help", main], ...(await Promise.all(runs.map(async (args) => [`stowage ${args.join(" ")} --help`, await help(...args)] as [string, string])))];
  expect(citing(texts)).toEqual([]);
}, 60_000);

/** Every string in a JSON value, with its JSON path. */
function* strings(value: unknown, path = "$"): Generator<[string, string]> {
  if (typeof value === "string") yield [path, value];
  else if (Array.isArray(value)) for (const [i, v] of value.entries()) yield* strings(v, `${path}[${i}]`);
  else if (value && typeof value === "object") for (const [k, v] of Object.entries(value)) yield* strings(v, `${path}.${k}`);
}

test("no text of the served OpenAPI document cites a design or issue number", async () => {
  const server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", join(tempDir("user-text"), "data")]);
  try {
    const doc = (await (await fetch(`${server.url}/openapi/json`)).json()) as unknown;
    const all = [...strings(doc)];
    // The whole document: hundreds of operations' summaries and schema descriptions.
    expect(all.filter(([path]) => /\.(summary|description)$/.test(path)).length).toBeGreaterThan(200);
    expect(citing(all)).toEqual([]);
  } finally {
    await server.stop();
  }
}, 60_000);
