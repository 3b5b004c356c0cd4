#!/usr/bin/env bun
/**
 * The `stowage` command line. Exit codes: 0 done, 1 failed, 2 bad usage or configuration.
 *
 * @example
 *   stowage serve --port 8080 --data-dir ./data
 */
import { ConfigError, describeSettings, parseConfig, processEnv } from "./config.ts";
import { createLogger, flushLogs } from "./log.ts";
import { version } from "./version.ts";
import { EXTRACT_ANVIL_COMMAND, writeEmbeddedAnvil } from "./chain/anvil-binary.ts";
import { adminHelpFor, runAdmin } from "./cli/admin.ts";
import { chainHelp, runChain } from "./cli/chain.ts";
import { userCommands } from "./cli/user/index.ts";

const EXIT_FAILED = 1;
const EXIT_USAGE = 2;

interface Command {
  summary: string;
  /** The command's help; `args` are what followed it (`admin backup --help`: a subcommand's). */
  help: (args: string[]) => string;
  run: (args: string[]) => Promise<number>;
}

const commands: Record<string, Command> = {
  serve: {
    summary: "Start the server (embedded database, storage, IPFS node and chain by default)",
    help: () => ["Usage: stowage serve [options]", "", "Every option can also be set by its environment variable:", ...describeSettings("server")].join("\n"),
    run: serve,
  },
  admin: {
    summary: "Quota grants, prices and funding (admin key); backup, restore, check and usage of the data; blocking content",
    help: (args) => adminHelpFor(args[0]),
    run: (args) => runAdmin(args, processEnv),
  },
  chain: {
    summary: "Deploy the contracts to an external chain",
    help: () => chainHelp,
    run: (args) => runChain(args, processEnv),
  },
  // login, put, get, ls, rm, quota, deposit, buy, publish, search: a gateway's user, from a shell.
  ...userCommands(processEnv),
};

function mainHelp(): string {
  const names = Object.keys(commands);
  return [
    `stowage ${version}: self-hosted storage middleware and account API`,
    "",
    "Usage: stowage <command> [options]",
    "",
    "Commands:",
    ...names.map((n) => `  ${n.padEnd(14)} ${commands[n]?.summary}`),
    `  ${"help".padEnd(14)} Show this help, or a command's with: stowage <command> --help`,
    "",
    "Settings (flags of `stowage serve`, or environment variables):",
    ...describeSettings("server"),
  ].join("\n");
}

async function serve(args: string[]): Promise<number> {
  const config = parseConfig(args, processEnv);
  const log = createLogger(config.logLevel as "info");
  // Loaded here, not at the top: the user commands start without the whole server (helia,
  // libp2p, the database), which more than halves each `./stowage …` run.
  const { startServer } = await import("./server.ts");
  const server = await startServer(config, log);
  // The log's lines wait for the next turn of the loop: they go first, as they came first.
  flushLogs();
  if (server.s3Url) console.log(`stowage S3 API listening on ${server.s3Url}`);
  console.log(`stowage listening on ${server.url}`);
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) {
        log.warn("second signal: exiting now", { signal });
        process.exit(EXIT_FAILED);
      }
      stopping = true;
      log.info("stopping", { signal });
      server.stop().then(
        () => resolve(0),
        (err) => {
          log.error("stop failed", { err: (err as Error).message });
          resolve(EXIT_FAILED);
        },
      );
    };
    process.on("SIGTERM", () => stop("SIGTERM"));
    process.on("SIGINT", () => stop("SIGINT"));
  });
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  // Not a user's command: a serving binary runs it in a child process (chain/anvil-binary.ts).
  if (name === EXTRACT_ANVIL_COMMAND && rest.length === 1) {
    await writeEmbeddedAnvil(rest[0] as string);
    return 0;
  }
  if (name === undefined || name === "help" || name === "--help" || name === "-h") {
    const target = name === "help" && rest[0] ? commands[rest[0]] : undefined;
    console.log(target ? target.help(rest.slice(1)) : mainHelp());
    return 0;
  }
  if (name === "--version" || name === "-v") {
    console.log(version);
    return 0;
  }
  const command = commands[name];
  if (!command) {
    console.error(`stowage: unknown command "${name}"\nSee: stowage --help`);
    return EXIT_USAGE;
  }
  if (rest.includes("--help") || rest.includes("-h")) {
    console.log(command.help(rest));
    return 0;
  }
  try {
    return await command.run(rest);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`stowage ${name}: ${err.message}\nSee: stowage ${name} --help`);
      return EXIT_USAGE;
    }
    console.error(`stowage ${name}: ${(err as Error).message}`);
    return EXIT_FAILED;
  }
}

if (import.meta.main) {
  process.exit(await main(process.argv.slice(2)));
}
