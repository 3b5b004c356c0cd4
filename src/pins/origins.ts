/**
 * Which of a pin's origins the gateway dials by default: those on public addresses. An origin is
 * the client's to choose, and a gateway on the open internet that dialled loopback or private
 * addresses for anyone would let a client probe the operator's own network (which hosts answer,
 * on which ports) through the pins' outcomes. DNS names are dialled (libp2p resolves them), as
 * they are what public peers announce.
 */
import type { Multiaddr } from "@multiformats/multiaddr";
import { isIP } from "node:net";

const PRIVATE_V4: readonly [number, number][] = [
  [0x00000000, 8], // 0.0.0.0/8
  [0x0a000000, 8], // 10/8
  [0x64400000, 10], // 100.64/10 (carrier-grade NAT)
  [0x7f000000, 8], // loopback
  [0xa9fe0000, 16], // link-local
  [0xac100000, 12], // 172.16/12
  [0xc0a80000, 16], // 192.168/16
  [0xe0000000, 3], // multicast and reserved
];

function privateV4(ip: string): boolean {
  const n = ip.split(".").reduce((acc, part) => acc * 256 + Number(part), 0);
  return PRIVATE_V4.some(([net, bits]) => Math.floor(n / 2 ** (32 - bits)) === Math.floor(net / 2 ** (32 - bits)));
}

function privateV6(ip: string): boolean {
  const lower = ip.toLowerCase();
  if (lower === "::" || lower === "::1") return true;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (mapped) return privateV4(mapped[1] as string);
  const first = Number.parseInt(lower.split(":")[0] || "0", 16);
  // fc00::/7 unique local, fe80::/10 link-local, ff00::/8 multicast
  return (first & 0xfe00) === 0xfc00 || (first & 0xffc0) === 0xfe80 || (first & 0xff00) === 0xff00;
}

/** Whether the multiaddr's host is no loopback, private, link-local or reserved address. */
export function publicOrigin(ma: Multiaddr): boolean {
  for (const c of ma.getComponents()) {
    if (c.name === "ip4" && c.value) return isIP(c.value) === 4 && !privateV4(c.value);
    if (c.name === "ip6" && c.value) return isIP(c.value) === 6 && !privateV6(c.value);
    if (c.name === "dns" || c.name === "dns4" || c.name === "dns6" || c.name === "dnsaddr") return c.value !== "localhost" && !c.value?.endsWith(".localhost");
  }
  return false;
}
