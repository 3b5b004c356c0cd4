/**
 * Every address `stowage serve` will listen on, checked before anything else starts. A busy port
 * found only when its listener binds is found after the data dir, the embedded chain and the IPFS
 * node have started (seconds in, with their own logs in the way), and one at a time. Here all of
 * them are tried at once, and the error names each busy one's setting and a way out (another port,
 * or turning that listener off), as a bad setting: exit code 2.
 *
 * A check is a bind and an immediate close, so another program can still take a port between the
 * check and the real bind: that rarer case fails at the bind, with the same words (`portTaken`).
 *
 * @example
 *   await checkPorts(config) // throws a ConfigError listing every busy address
 */
import { createServer } from "node:net";
import { ConfigError } from "./config-error.ts";
import type { Config } from "./config.ts";

export interface Wanted {
  /** What listens there, as a user knows it. */
  what: string;
  host: string;
  port: number;
  /** The setting, as its environment variable and flag. */
  setting: string;
  /** How to get out of the way of whatever holds it. */
  advice: string;
}

/** The addresses `config` makes the server listen on (port 0, a free one, is never busy). */
export function wantedPorts(config: Pick<Config, "host" | "port" | "s3ApiPort" | "metricsListen" | "ipfsListen">): Wanted[] {
  const wanted: Wanted[] = [];
  if (config.port !== 0) wanted.push({ what: "the HTTP API", host: config.host, port: config.port, setting: "STOWAGE_PORT / --port", advice: `pick another, such as --port ${next(config.port)}` });
  if (config.s3ApiPort !== 0) {
    wanted.push({ what: "the S3 API", host: config.host, port: config.s3ApiPort, setting: "STOWAGE_S3_API_PORT / --s3-api-port", advice: `pick another, such as --s3-api-port ${next(config.s3ApiPort)}, or turn the S3 API off with --s3-api-port 0` });
  }
  const metrics = /^\[?([^\]]+)\]?:(\d+)$/.exec(config.metricsListen);
  if (metrics && Number(metrics[2]) !== 0) {
    const [host, port] = [metrics[1] as string, Number(metrics[2])];
    wanted.push({ what: "the metrics listener", host, port, setting: "STOWAGE_METRICS_LISTEN / --metrics-listen", advice: `pick another, such as --metrics-listen ${host.includes(":") ? `[${host}]` : host}:${next(port)}, or turn it off with --metrics-listen off` });
  }
  for (const addr of config.ipfsListen) {
    const m = /^\/ip([46])\/([^/]+)\/tcp\/(\d+)(?:\/|$)/.exec(addr);
    if (!m || Number(m[3]) === 0) continue;
    const port = Number(m[3]);
    wanted.push({ what: "the IPFS node", host: m[2] as string, port, setting: "STOWAGE_IPFS_LISTEN / --ipfs-listen", advice: `pick another, such as --ipfs-listen ${addr.replace(`/tcp/${port}`, `/tcp/${next(port)}`)}` });
  }
  return wanted;
}

const WILDCARD = new Set(["0.0.0.0", "::", "[::]"]);

const next = (port: number) => (port >= 65535 ? 1024 : port + 1);

/** Whether `host:port` can be bound now (bound, then closed at once). */
function bindable(host: string, port: number): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", (err: NodeJS.ErrnoException) => resolve(err));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}

/** One line of the error for an address that cannot be had. */
export function portTaken(w: Wanted, cause: string): string {
  return `${w.what} cannot listen on ${w.host.includes(":") ? `[${w.host}]` : w.host}:${w.port} (${w.setting}): ${cause}; ${w.advice}`;
}

export const causeOf = (err: NodeJS.ErrnoException) =>
  err.code === "EADDRINUSE" ? "the port is in use" : err.code === "EACCES" ? "permission denied (ports below 1024 need privileges)" : err.code === "EADDRNOTAVAIL" ? "no such address on this machine" : err.message;

/** Throws a ConfigError naming every address of `config` that is busy, or that two settings share. */
export async function checkPorts(config: Parameters<typeof wantedPorts>[0]): Promise<void> {
  const wanted = wantedPorts(config);
  const problems: string[] = [];
  for (const [i, w] of wanted.entries()) {
    // Two of ours on one port fail each other when they share an address, or one is a wildcard
    // (0.0.0.0 or :: covers every address); on two distinct addresses they do not.
    const other = wanted.slice(0, i).find((o) => o.port === w.port && o.what !== w.what && (o.host === w.host || WILDCARD.has(o.host) || WILDCARD.has(w.host)));
    if (other) problems.push(portTaken(w, `${other.what} (${other.setting}) wants the same port`));
  }
  // One after the other: an IPv4 and an IPv6 address of one port, tried at once, could fail each other.
  for (const w of wanted) {
    const err = await bindable(w.host, w.port);
    if (err) problems.push(portTaken(w, causeOf(err)));
  }
  if (problems.length) throw new ConfigError(`cannot start: ${problems.length === 1 ? problems[0] : `\n  ${problems.join("\n  ")}`}`);
}
