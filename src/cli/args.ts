/**
 * A small parser for subcommand flags: `--name value`, `--name=value` and positionals.
 * Unknown flags are errors (ConfigError, exit code 2).
 */
import { ConfigError } from "../config.ts";

export interface Parsed {
  flags: Map<string, string>;
  positionals: string[];
}

/** `switches` are flags without a value (`--force`); they map to "true". */
export function parseArgs(argv: readonly string[], known: readonly string[], switches: readonly string[] = []): Parsed {
  const flags = new Map<string, string>();
  const positionals: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (!arg.startsWith("--")) {
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf("=");
    const name = eq > 0 ? arg.slice(0, eq) : arg;
    if (switches.includes(name) && eq < 0) {
      flags.set(name, "true");
      continue;
    }
    if (!known.includes(name)) throw new ConfigError(`unknown option ${name}`);
    const value = eq > 0 ? arg.slice(eq + 1) : argv[++i];
    if (value === undefined) throw new ConfigError(`${name} needs a value`);
    flags.set(name, value);
  }
  return { flags, positionals };
}
