/**
 * A bad setting or bad usage (exit code 2). Its own file, so the option parser (src/cli/args.ts)
 * that config.ts uses can throw it without importing config.ts back.
 */
export class ConfigError extends Error {
  override name = "ConfigError";
}
