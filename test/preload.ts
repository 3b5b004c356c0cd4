/**
 * Runs before any test file loads (bunfig.toml): installs libsecp256k1 where it is missing. The
 * signer probes for the library once per process, at its first recovery, and `bun test` runs
 * every file in one process: installed by test/identity's own files only, after another file's
 * login had probed, the native path stayed off for the whole run on a fresh machine.
 */
import { ensureLibsecp256k1 } from "./identity/support.ts";

await ensureLibsecp256k1();
