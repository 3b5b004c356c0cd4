/**
 * A backup that stops dead at one step, for the tests of a killed backup (backup-rerun.test.ts):
 * `bun test/ops/backup-frozen.ts DATA_DIR DEST STEP` runs `stowage admin backup`'s own code and,
 * when it reports STEP, prints `frozen <the progress as JSON>` and blocks its thread for good, so
 * nothing after that point runs; the test then kills it with SIGKILL, as a crash or an operator
 * would. With STEP `none` it runs to the end and prints its report as JSON.
 */
import { writeSync } from "node:fs";
import { parseConfig } from "../../src/config.ts";
import { runBackup, type BackupProgress } from "../../src/ops/backup.ts";

const [dataDir, dest, step] = process.argv.slice(2) as [string, string, string];
const freeze = (p: BackupProgress) => {
  if (p.step !== step) return;
  writeSync(1, `frozen ${JSON.stringify(p)}\n`);
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
};
const report = await runBackup({ config: parseConfig(["--data-dir", dataDir], {}), dest, progress: freeze });
writeSync(1, `${JSON.stringify(report)}\n`);
