/**
 * The server loads only the IPFS code its node runs (idle RSS): not libp2p's default
 * configuration that the entry points of `helia` and `@helia/libp2p` import (DHT, WebRTC with its
 * native module, circuit relay, AutoTLS/ACME, UPnP, HTTP gateways), nor @helia/unixfs or
 * ipfs-unixfs-exporter, which nothing in the server calls. Those cost ≈ 28 MiB of idle RSS.
 * Nor nodemailer, which only a mailed login code needs.
 * A fresh process imports the server's module and lists every module it loaded.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..", "..");

/** Packages the server must not load at start. */
const UNUSED = [
  "helia/dist/src/index.js", // the entry point, with withLibp2p's defaults
  "@helia/libp2p/dist/src/index.js",
  "@helia/libp2p/dist/src/utils/libp2p-defaults",
  "@helia/http",
  "@libp2p/kad-dht",
  "@libp2p/webrtc",
  "node-datachannel",
  "@libp2p/circuit-relay-v2",
  "@ipshipyard/libp2p-auto-tls",
  "acme-client",
  "@libp2p/upnp-nat",
  "@helia/unixfs",
  "ipfs-unixfs-exporter",
  "blockstore-fs", // only for a data dir from before the blob store (migrate.ts)
  "nodemailer", // loaded with the first login code mailed (src/accounts/mailer.ts): ≈ 4.5 MiB of idle RSS
];

test("starting the server's module loads no unused IPFS package, nor nodemailer", async () => {
  const script = `await import(${JSON.stringify(join(ROOT, "src", "server.ts"))}); console.log(JSON.stringify(Object.keys(require.cache)));`;
  const proc = Bun.spawn([process.execPath, "-e", script], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect(err).toBe("");
  expect(code).toBe(0);
  const loaded = JSON.parse(out) as string[];
  // The probe sees modules at all: the node's own packages are there.
  expect(loaded.some((m) => m.includes("/node_modules/libp2p/"))).toBe(true);
  expect(loaded.some((m) => m.includes("/node_modules/@helia/bitswap/"))).toBe(true);
  expect(UNUSED.flatMap((pkg) => loaded.filter((m) => m.includes(`/node_modules/${pkg}`)).slice(0, 1))).toEqual([]);
}, 30_000);
