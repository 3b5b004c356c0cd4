/**
 * Temporary directories under the repo's `.test-data/`, removed when the test process exits
 * (so they can be made anywhere: at file level, in hooks or inside tests).
 */
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dir, "..", "..", ".test-data");
const made: string[] = [];
process.on("exit", () => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

export function tempDir(prefix = "t"): string {
  mkdirSync(root, { recursive: true });
  const dir = mkdtempSync(join(root, `${prefix}-`));
  made.push(dir);
  return dir;
}
