/**
 * `stowage admin block | unblock | blocked`: the operator's own denylist (D25), in the database,
 * so it works on a running gateway (each gateway of a cluster reads a change within a second) and
 * on a stopped one. The files of STOWAGE_DENYLIST are the other source; this command writes none.
 * Blocking deletes nothing: the owner keeps the file, which is served again once unblocked.
 *
 * @example
 *   stowage admin block bafy… --reason "court order 2025-17"
 *   stowage admin block bafy…/docs/leak.pdf --reason "DMCA notice 4411"
 *   stowage admin unblock bafy…
 *   stowage admin blocked --all --json
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { parseConfig, type Env } from "../config.ts";
import { openStore, type Store } from "../db/connect.ts";
import { block, BlockInputError, blocks, unblock, type BlockRow } from "../denylist/index.ts";
import { silentLogger } from "../log.ts";
import { parseArgs } from "./args.ts";
import { CliError } from "./chain-access.ts";
import { ConfigError } from "../config-error.ts";

type Out = (line: string) => void;

export const blockCommands = ["block", "unblock", "blocked"] as const;
export type BlockCommand = (typeof blockCommands)[number];
export const isBlockCommand = (name: string | undefined): name is BlockCommand => (blockCommands as readonly string[]).includes(name ?? "");

export const blockHelp = `  block CID[/PATH] --reason TEXT
        Block content on every gateway of this deployment: its downloads, S3 reads, the
        gateways and bitswap answer 410, and uploads of it are refused. Also /ipfs/CID/PATH*
        (every path below) or //HASH (a double-hashed rule). Nothing is deleted.
  unblock CID[/PATH]
        Lift a block made with \`block\` (however the CID is written).
  blocked [--all] [--json]
        List the blocks in force (--all: lifted ones too, with when).`;

const dataDirOption = `  --data-dir DIR    the gateway's data dir (default ./data, or STOWAGE_DATA_DIR); with PostgreSQL,
                    STOWAGE_DATABASE_URL names the database instead`;

/** Each command's own \`--help\`. */
export const blockCommandHelp: Record<BlockCommand, string> = {
  block: `Usage: stowage admin block CID[/PATH] --reason TEXT [--data-dir DIR]

  Blocks content on every gateway of this deployment, running or not (a running one reads the
  change within a second): its downloads, S3 reads, the path and trustless gateways and bitswap
  answer 410, and uploads of it are refused. Nothing is deleted: the owner keeps the file, and it
  is served again once unblocked. Prints the rule as stored; blocking it again replaces its reason.

  CID               a CID, in any version or base
  CID/PATH          one path below a directory ('CID/PATH/*': PATH and every path below it)
  //HASH            a double-hashed rule, as shared denylists publish them
  --reason TEXT     why, kept with the rule (a court order, a notice number); required
${dataDirOption}`,
  unblock: `Usage: stowage admin unblock CID[/PATH] [--data-dir DIR]

  Lifts a block made with \`stowage admin block\` (however the CID is written); the content is
  served again within a second. The record stays, with when it was lifted (\`blocked --all\`).
  Exit code 1 when no such block is in force; a STOWAGE_DENYLIST file may block it (edit the file).

${dataDirOption}`,
  blocked: `Usage: stowage admin blocked [--all] [--json] [--data-dir DIR]

  Lists the blocks in force, one a line: the rule, when it was blocked, and its reason. Blocks of
  STOWAGE_DENYLIST files are not listed (they are the files').

  --all             lifted blocks too, with when they were lifted
  --json            print the rows as JSON
${dataDirOption}`,
};

/** The database of the data dir (or STOWAGE_DATABASE_URL): never a new empty one made by a typo. */
async function openDatabase(dataDir: string | undefined, env: Env): Promise<Store> {
  const config = parseConfig(dataDir !== undefined ? ["--data-dir", dataDir] : [], env);
  if (!config.databaseUrl && !existsSync(join(config.dataDir, "stowage.db"))) {
    throw new CliError(`no gateway database in ${config.dataDir}: --data-dir (or STOWAGE_DATA_DIR) names the server's data dir, or set STOWAGE_DATABASE_URL`);
  }
  return openStore(config, silentLogger);
}

const when = (ms: number) => new Date(ms).toISOString();
const line = (r: BlockRow) => `${r.rule}\tblocked ${when(r.blockedAt)}${r.liftedAt === null ? "" : `\tlifted ${when(r.liftedAt)}`}\t${r.reason}`;

export async function runBlock(sub: BlockCommand, argv: string[], env: Env, out: Out, log: Out): Promise<number> {
  const { flags, positionals } = parseArgs(argv, ["--data-dir", "--reason"], ["--all", "--json"]);
  const dataDir = flags.get("--data-dir");
  if (sub === "blocked") {
    if (positionals.length) throw new ConfigError(`unexpected argument ${positionals[0]}`);
    if (flags.has("--reason")) throw new ConfigError("--reason is for block");
  } else {
    if (positionals.length !== 1) throw new ConfigError(positionals.length ? `unexpected argument ${positionals[1]}` : `${sub} needs the CID (or CID/PATH) to ${sub}`);
    if (flags.has("--all") || flags.has("--json")) throw new ConfigError(`--all and --json are for blocked`);
    if (sub === "block" && !flags.get("--reason")?.trim()) throw new ConfigError("block needs --reason TEXT: the record says why");
    if (sub === "unblock" && flags.has("--reason")) throw new ConfigError("--reason is for block");
  }
  const store = await openDatabase(dataDir, env);
  try {
    if (sub === "block") {
      const { row, created } = await block(store.sql, positionals[0] as string, flags.get("--reason") as string);
      out(row.rule);
      log(created ? `blocked ${row.rule}: every gateway of this deployment answers 410 for it within a second` : `${row.rule} was blocked already: its reason is now "${row.reason}"`);
      return 0;
    }
    if (sub === "unblock") {
      const lifted = await unblock(store.sql, positionals[0] as string);
      if (lifted.length === 0) {
        log(`${positionals[0]} is not blocked by \`stowage admin block\` (a STOWAGE_DENYLIST file may block it: edit the file)`);
        return 1;
      }
      for (const r of lifted) out(r.rule);
      log(`unblocked: served again within a second`);
      return 0;
    }
    const rows = await blocks(store.sql, flags.has("--all"));
    if (flags.has("--json")) out(JSON.stringify(rows));
    else for (const r of rows) out(line(r));
    return 0;
  } catch (err) {
    if (err instanceof BlockInputError) throw new ConfigError(err.message);
    throw err;
  } finally {
    await store.close();
  }
}
