/**
 * Everything the server writes is private (D14): the data dir holds emails, password hashes, file
 * names and keys. The process umask is 077, so what it (and anvil, its child) creates is 0600 or
 * 0700 whatever library writes it; and the data dir itself must not be open to others. A git
 * clone's `./data` (0755) still starts: a dir the server owns is made 0700, with a log line; one
 * it does not own is refused, since changing someone else's folder is not ours to do.
 *
 * @example
 *   makePrivate("data", log)   // creates it 0700, or tightens it, or throws InsecureDataDir
 */
import { chmodSync, mkdirSync, statSync } from "node:fs";
import type { Logger } from "../log.ts";

export class InsecureDataDir extends Error {
  override name = "InsecureDataDir";
}

export function makePrivate(dataDir: string, log: Logger): void {
  process.umask(0o077);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const st = statSync(dataDir);
  const mode = st.mode & 0o777;
  if ((mode & 0o077) === 0) return;
  const was = mode.toString(8);
  if (st.uid !== process.getuid?.()) {
    throw new InsecureDataDir(`data dir ${dataDir} is open to other users (mode ${was}) and belongs to uid ${st.uid}, not to this user: run chmod 700 on it, or choose another data dir`);
  }
  try {
    chmodSync(dataDir, 0o700);
  } catch (err) {
    throw new InsecureDataDir(`data dir ${dataDir} is open to other users (mode ${was}) and could not be made private (${(err as Error).message}): run chmod 700 on it`);
  }
  log.warn("data dir was open to other users: made it private", { dataDir, was, now: "700" });
}
