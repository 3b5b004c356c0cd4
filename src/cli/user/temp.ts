/**
 * Private temporary folders of the user commands — a stdin spool holds plaintext, a sealed file
 * ciphertext — removed when the command is done with them, and on SIGINT or SIGTERM too: a signal
 * ends the process without running `finally`, and the plaintext would stay in the temp folder.
 *
 * @example
 *   const tmp = await privateTempDir("stowage-put-")
 *   try { … join(tmp.dir, "stdin") … } finally { await tmp.remove() }
 */
import { rmSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const live = new Set<string>();
let hooked = false;

/** Exit codes of a shell for a process ended by the signal. */
const SIGNALS = { SIGINT: 130, SIGTERM: 143 } as const;

function removeLiveOnSignals() {
  if (hooked) return;
  hooked = true;
  for (const [signal, code] of Object.entries(SIGNALS)) {
    process.once(signal, () => {
      for (const dir of live) rmSync(dir, { recursive: true, force: true });
      process.exit(code);
    });
  }
}

/** A new folder only this user can open (mkdtemp makes it 0700). */
export async function privateTempDir(prefix: string): Promise<{ dir: string; remove: () => Promise<void> }> {
  removeLiveOnSignals();
  const dir = await mkdtemp(join(tmpdir(), prefix));
  live.add(dir);
  return {
    dir,
    async remove() {
      live.delete(dir);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
