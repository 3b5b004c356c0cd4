/**
 * The key a client address counts under in every per-client limit (rate limits, public egress):
 * one host commonly holds a whole IPv6 /64 and could otherwise take a fresh address per request,
 * so IPv6 counts per /64 while IPv4 counts per address.
 *
 * A limit whose key parameter is typed `ClientKey` takes only `requestClientKey(request)` (or
 * `clientKeyOf(ip)`), never a raw address.
 *
 * @example
 *   clientKey("2001:db8:1:2::1") // "2001:db8:1:2::/64"
 *   enforce(ctx, limits.loginsPerIp, requestClientKey(request))
 */
import { clientIp } from "./client-ip.ts";

/** A client address as every per-client limit counts it (see `clientKey`). */
export type ClientKey = string & { readonly __brand: "ClientKey" };

/** The key an address counts under: an IPv4 address as it is (IPv4-mapped IPv6 included), an
 * IPv6 address as its /64 prefix. Anything else (a test's "local") as it is. */
export function clientKey(ip: string): string {
  const address = ip.replace(/%.*$/, "").toLowerCase();
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(address);
  if (mapped) return mapped[1] as string;
  if (!address.includes(":")) return address;
  const [head = "", tail] = address.split("::");
  const groups = (s: string) => (s === "" ? [] : s.split(":"));
  const left = groups(head);
  const right = tail === undefined ? [] : groups(tail);
  // An embedded IPv4 tail is two groups; only the first four groups matter here anyway.
  const width = right.reduce((n, g) => n + (g.includes(".") ? 2 : 1), 0);
  const all = tail === undefined ? left : [...left, ...Array<string>(Math.max(0, 8 - left.length - width)).fill("0"), ...right];
  const prefix = all.slice(0, 4).map((g) => (Number.parseInt(g, 16) || 0).toString(16));
  while (prefix.length < 4) prefix.push("0");
  return `${prefix.join(":")}::/64`;
}

/** `clientKey(ip)`, typed for the limits that take only a client's key. */
export const clientKeyOf = (ip: string): ClientKey => clientKey(ip) as ClientKey;

/** The key of the client that sent `request` (its address as the socket or a trusted proxy saw it). */
export const requestClientKey = (request: Request): ClientKey => clientKeyOf(clientIp(request));
