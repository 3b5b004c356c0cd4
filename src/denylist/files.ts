/**
 * The denylist files of STOWAGE_DENYLIST, read at start and again whenever one changes. Each file
 * is looked at (stat: modification time, size, inode) every `intervalMs`, which sees appends,
 * rewrites and a file replaced by rename alike, and costs a few system calls a second whatever the
 * lists' size. A file that changed is read again whole, its lines compiled a slice at a time
 * (rules.ts keeps what matching needs, not the lines), the event loop served in between.
 *
 * At start a file that is missing or whose header the format refuses stops the server, naming the
 * file: a typo must not leave content unblocked. Later, such a file keeps the rules it had and the
 * failure is logged; lines that are no rule are logged (the first few, and how many) and skipped.
 *
 * @example
 *   const files = await watchDenylistFiles(["/etc/stowage/badbits.deny"], { log, onChange: rebuild })
 *   files.lists()   // one RuleSet per file, in order
 *   files.stop()
 */
import { stat } from "node:fs/promises";
import type { Logger } from "../log.ts";
import { bodyLines, DenylistFormatError, readHeader } from "./format.ts";
import { RuleSet } from "./rules.ts";

/** How often the files are looked at. */
export const FILE_CHECK_MS = 1000;
/** Unreadable lines logged one by one per file; the rest are counted. */
const PROBLEMS_LOGGED = 10;
/** Lines read between two turns of the event loop (≈ 30 ms). */
const LINES_PER_SLICE = 5_000;

export class DenylistFileError extends Error {
  override name = "DenylistFileError";
}

interface Loaded {
  path: string;
  /** What identifies the version read: mtime, size and inode. */
  stamp: string;
  /** Its rules, compiled (the parsed lines are not kept: a list may hold a million). */
  rules: RuleSet;
}

async function stampOf(path: string): Promise<string> {
  const s = await stat(path);
  if (!s.isFile()) throw new DenylistFileError(`${path} is not a file`);
  return `${s.mtimeMs}:${s.size}:${s.ino}`;
}

async function load(path: string, log: Logger): Promise<Loaded> {
  let stamp: string;
  let text: string;
  try {
    stamp = await stampOf(path);
    text = await Bun.file(path).text();
  } catch (err) {
    if (err instanceof DenylistFileError) throw err;
    throw new DenylistFileError(`${path} cannot be read: ${(err as Error).message}`);
  }
  let head: ReturnType<typeof readHeader>;
  try {
    head = readHeader(text);
  } catch (err) {
    if (err instanceof DenylistFormatError) throw new DenylistFileError(`${path}: ${err.message}`);
    throw err;
  }
  // A slice of lines at a time, the event loop served in between: a list of a million lines
  // takes seconds to read, and requests keep being answered meanwhile.
  const rules = new RuleSet(path);
  let lines = 0;
  let unused = 0;
  let skipped = 0;
  for (const item of bodyLines(head.body, head.firstLine)) {
    if ("problem" in item) {
      if (skipped++ < PROBLEMS_LOGGED) log.warn("denylist line skipped", { file: path, line: item.line, problem: item.problem });
    } else for (const rule of item.rules) if (!rules.add(rule)) unused++;
    if (++lines % LINES_PER_SLICE === 0) await new Promise((next) => setImmediate(next));
  }
  if (skipped > PROBLEMS_LOGGED) log.warn("denylist lines skipped", { file: path, more: skipped - PROBLEMS_LOGGED });
  log.info("denylist loaded", { file: path, name: head.header.name, rules: rules.size, unused, skipped });
  return { path, stamp, rules };
}

export interface DenylistFiles {
  /** Each file's rules, in the order the files were given. */
  lists(): RuleSet[];
  /** Looks at every file now (the timer does this every `intervalMs`); true if one was read again. */
  check(): Promise<boolean>;
  stop(): void;
}

export async function watchDenylistFiles(paths: readonly string[], opts: { log: Logger; onChange: () => void; intervalMs?: number }): Promise<DenylistFiles> {
  const { log } = opts;
  const loaded: Loaded[] = [];
  for (const path of paths) loaded.push(await load(path, log));

  let checking: Promise<boolean> | undefined;
  async function checkAll(): Promise<boolean> {
    let changed = false;
    for (let i = 0; i < loaded.length; i++) {
      const current = loaded[i] as Loaded;
      try {
        if ((await stampOf(current.path)) === current.stamp) continue;
        loaded[i] = await load(current.path, log);
        changed = true;
      } catch (err) {
        // Logged once per version of the problem: the stamp of what failed is kept.
        const stamp = await stampOf(current.path).catch(() => "missing");
        if (stamp !== current.stamp) {
          log.error("denylist not reloaded: its previous rules stay in force", { file: current.path, err: (err as Error).message });
          loaded[i] = { ...current, stamp };
        }
      }
    }
    if (changed) opts.onChange();
    return changed;
  }
  const check = () => (checking ??= checkAll().finally(() => (checking = undefined)));

  const timer = paths.length > 0 ? setInterval(() => void check(), opts.intervalMs ?? FILE_CHECK_MS) : undefined;
  timer?.unref();
  return {
    lists: () => loaded.map((l) => l.rules),
    check,
    stop: () => clearInterval(timer),
  };
}
