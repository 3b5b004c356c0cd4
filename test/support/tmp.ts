/** Temporary directories under the repo's `.test-data/`, removed after the test file. */
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll } from "bun:test";

const root = join(import.meta.dir, "..", "..", ".test-data");

export function tempDir(prefix = "t"): string {
  mkdirSync(root, { recursive: true });
  const dir = mkdtempSync(join(root, `${prefix}-`));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
