/**
 * Options of every `stowage` parser — the server's flags (config.ts), the operator commands
 * (admin, chain) and the user commands — through node:util `parseArgs` in strict mode: an unknown
 * option is an error, `--name value` and `--name=value` both work, `-` alone is a positional.
 * Its errors are said in this command line's words (ConfigError: exit code 2).
 *
 * @example
 *   const { flags, positionals } = parseOptions(["--data-dir", "d", "fund", "-j"], { flags: ["--data-dir"], switches: ["--json"], short: { "-j": "--json" } })
 *   flags.get("--json") // "true"
 */
import { parseArgs as parseNodeArgs } from "node:util";
import { ConfigError } from "../config-error.ts";

export interface OptionSpec {
  /** Options with a value (`--out PATH`). */
  flags?: readonly string[];
  /** Options without one (`--json`): "true" when given. */
  switches?: readonly string[];
  /** Options with a value that may come many times (`--keyword a --keyword b`). */
  repeated?: readonly string[];
  /** Short forms, such as { "-o": "--out" }; only those whose long form is in this spec are taken. */
  short?: Readonly<Record<string, string>>;
}

export interface ParsedOptions {
  flags: Map<string, string>;
  repeated: Map<string, string[]>;
  positionals: string[];
}

type NodeOption = { type: "string" | "boolean"; multiple?: boolean; short?: string };

export function parseOptions(argv: readonly string[], spec: OptionSpec): ParsedOptions {
  const options: Record<string, NodeOption> = {};
  const shortOf = (long: string) => Object.entries(spec.short ?? {}).find(([, l]) => l === long)?.[0].slice(1);
  const add = (long: string, type: NodeOption["type"], multiple = false) => {
    const short = shortOf(long);
    options[long.slice(2)] = { type, ...(multiple ? { multiple } : {}), ...(short ? { short } : {}) };
  };
  for (const f of spec.flags ?? []) add(f, "string");
  for (const f of spec.switches ?? []) add(f, "boolean");
  for (const f of spec.repeated ?? []) add(f, "string", true);
  let parsed: ReturnType<typeof parseNodeArgs>;
  try {
    parsed = parseNodeArgs({ args: [...argv], options, strict: true, allowPositionals: true });
  } catch (err) {
    throw usageError(err);
  }
  const flags = new Map<string, string>();
  const repeated = new Map<string, string[]>();
  for (const [name, value] of Object.entries(parsed.values)) {
    if (Array.isArray(value)) repeated.set(`--${name}`, value.map(String));
    else if (value === true) flags.set(`--${name}`, "true");
    else if (typeof value === "string") flags.set(`--${name}`, value);
  }
  return { flags, repeated, positionals: parsed.positionals };
}

/** The operator commands' form: `known` take a value, `switches` do not. */
export function parseArgs(argv: readonly string[], known: readonly string[], switches: readonly string[] = []): { flags: Map<string, string>; positionals: string[] } {
  const { flags, positionals } = parseOptions(argv, { flags: known, switches });
  return { flags, positionals };
}

/** node:util's parse errors, in this command line's words. */
function usageError(err: unknown): ConfigError {
  const { code, message } = err as { code?: string; message: string };
  const unknown = /Unknown option '([^']+)'/.exec(message)?.[1];
  if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" && unknown) return new ConfigError(`unknown option ${unknown}`);
  const option = /'(?:-\w, )?(--[\w-]+)/.exec(message)?.[1];
  if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE" && option) {
    if (/argument missing/.test(message)) return new ConfigError(`${option} needs a value`);
    if (/ambiguous/.test(message)) return new ConfigError(`${option} needs a value (one that starts with "-" goes as ${option}=-…)`);
    if (/does not take an argument/.test(message)) return new ConfigError(`${option} takes no value`);
  }
  return new ConfigError(message);
}
