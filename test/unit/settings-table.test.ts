/**
 * README's settings table is the catalog's (src/config.ts), as scripts/settings-table.ts prints it:
 * a setting added, renamed or re-described without regenerating the table fails here.
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dir, "..", "..");

test("README's settings table is the one scripts/settings-table.ts prints", () => {
  const run = Bun.spawnSync([process.execPath, join(root, "scripts", "settings-table.ts")], { cwd: root, stdout: "pipe", stderr: "pipe", env: { ...process.env, BUN_BE_BUN: "1" } });
  expect(run.exitCode).toBe(0);
  const printed = run.stdout.toString().trimEnd();
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const start = readme.indexOf("| Environment variable | Flag of `stowage serve` |");
  expect(start).toBeGreaterThan(0);
  expect(readme.slice(start, readme.indexOf("\n\n", start))).toBe(printed);
  // No row is split by an unescaped `|` in its text: every row has the header's four cells.
  for (const row of printed.split("\n")) expect(row.replaceAll("\\|", "").split("|").length).toBe(6);
});
