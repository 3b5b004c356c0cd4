/** The start's port check (src/ports.ts): which of its own listeners clash with each other. */
import { expect, test } from "bun:test";
import { checkPorts } from "../../src/ports.ts";
import { freePort } from "../support/procs.ts";

const base = { host: "127.0.0.1", port: 0, s3ApiPort: 0, metricsListen: "", ipfsListen: [] as string[] };

test("two listeners on one port clash when they share an address or one is a wildcard, not on two addresses", async () => {
  const port = freePort();
  await expect(checkPorts({ ...base, metricsListen: `127.0.0.2:${port}`, ipfsListen: [`/ip4/127.0.0.1/tcp/${port}`] })).resolves.toBeUndefined();
  await expect(checkPorts({ ...base, metricsListen: `127.0.0.1:${port}`, ipfsListen: [`/ip4/127.0.0.1/tcp/${port}`] })).rejects.toThrow("wants the same port");
  await expect(checkPorts({ ...base, metricsListen: `127.0.0.1:${port}`, ipfsListen: [`/ip4/0.0.0.0/tcp/${port}`] })).rejects.toThrow("wants the same port");
  // One listener's own addresses (IPv4 and IPv6 of the IPFS node) are not a clash.
  await expect(checkPorts({ ...base, ipfsListen: [`/ip4/127.0.0.1/tcp/${port}`, `/ip6/::1/tcp/${port}`] })).resolves.toBeUndefined();
});
