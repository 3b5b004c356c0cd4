/**
 * Structured logs: one JSON object per line on stdout.
 *
 * Fields whose names look secret are replaced, so a careless call cannot leak a token.
 *
 * @example
 *   const log = createLogger("info")
 *   log.info("request", { method: "GET", path: "/healthz", status: 200, ms: 0.4 })
 */
export type Level = "debug" | "info" | "warn" | "error";
export type Fields = Record<string, unknown>;
export type Logger = Record<Level, (msg: string, fields?: Fields) => void>;

const ORDER: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };
/** Names of fields that may carry a secret: exact words, or these parts anywhere in the name. */
const SECRET = /^(sign|code|key)$|token|signature|secret|password|passwd|privatekey|authorization|cookie|initdata|mnemonic/i;

export function redact(fields: Fields): Fields {
  const out: Fields = {};
  for (const [k, v] of Object.entries(fields)) out[k] = SECRET.test(k) && v !== undefined ? "[redacted]" : v;
  return out;
}

/**
 * Lines for stdout, written once per turn of the event loop rather than one write each: at the
 * default level every request logs a line, and a write of its own cost a small request 15–30 µs.
 * A line waits at most until the loop's next check phase;
 * what is pending at exit is written then, so a stop loses nothing (a kill -9 may lose one turn's).
 */
let pending: string[] = [];
let scheduled = false;
/** Writes the lines still waiting, now: also before something else writes to stdout directly (the
 * server's "listening on" line), so stdout keeps the order of the calls, and at exit. */
export function flushLogs() {
  scheduled = false;
  if (pending.length === 0) return;
  const text = pending.join("");
  pending = [];
  process.stdout.write(text);
}
process.on("exit", flushLogs);
const stdoutLine = (line: string) => {
  pending.push(line);
  if (!scheduled) {
    scheduled = true;
    setImmediate(flushLogs);
  }
};

export function createLogger(level: Level, write: (line: string) => void = stdoutLine): Logger {
  const emit = (lvl: Level) => (msg: string, fields: Fields = {}) => {
    if (ORDER[lvl] < ORDER[level]) return;
    write(`${JSON.stringify({ t: new Date().toISOString(), level: lvl, msg, ...redact(fields) })}\n`);
  };
  return { debug: emit("debug"), info: emit("info"), warn: emit("warn"), error: emit("error") };
}

/** A logger that drops everything: for tests that do not look at logs. */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };
