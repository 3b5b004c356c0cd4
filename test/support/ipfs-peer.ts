/**
 * A second IPFS node in its own process, for interop tests: built by the same code as the
 * server's (startIpfsNode) in a temporary folder, it dials the given multiaddr over TCP, fetches
 * the Cid with bitswap and prints one JSON line: `{"sha256":"…","bytes":N,"ms":N}` or
 * `{"error":"…","name":"…"}` (exit code 1).
 *
 *   bun test/support/ipfs-peer.ts <multiaddr/p2p/peerId> <cid>[/<path>] [timeoutMs] [ipfsDir]
 *
 * `<cid>/<path>` fetches the file at that path of a UnixFS directory (each block on the way).
 * `ipfsDir` (default: a fresh temporary one) lets a test give the peer a key made beforehand, so
 * it knows the peer id (for allow-lists).
 */
import { unixfs } from "@helia/unixfs";
import { multiaddr } from "@multiformats/multiaddr";
import { CID } from "multiformats/cid";
import { join } from "node:path";
import { startIpfsNode } from "../../src/storage/ipfs/node.ts";
import { tempDir } from "./tmp.ts";

const [addr, cidText, timeoutText, ipfsDir] = process.argv.slice(2);
if (!addr || !cidText) {
  console.error("usage: bun test/support/ipfs-peer.ts <multiaddr> <cid> [timeoutMs] [ipfsDir]");
  process.exit(2);
}
const signal = AbortSignal.timeout(Number(timeoutText ?? 20_000));
const began = performance.now();
const node = await startIpfsNode({ dir: ipfsDir ?? join(tempDir("ipfs-peer"), "ipfs"), listen: ["/ip4/127.0.0.1/tcp/0"] });
let code = 0;
try {
  await node.helia.libp2p.dial(multiaddr(addr), { signal });
  const hash = new Bun.CryptoHasher("sha256");
  let bytes = 0;
  const [root, ...path] = cidText.split("/");
  for await (const chunk of unixfs(node.helia).cat(CID.parse(root as string), { signal, ...(path.length ? { path: path.join("/") } : {}) })) {
    hash.update(chunk);
    bytes += chunk.byteLength;
  }
  console.log(JSON.stringify({ sha256: hash.digest("hex"), bytes, ms: Math.round(performance.now() - began) }));
} catch (err) {
  console.log(JSON.stringify({ error: String((err as Error)?.message ?? err), name: (err as Error)?.name }));
  code = 1;
} finally {
  await node.stop().catch(() => {});
}
// Exit now: Bun otherwise lingers about a second on the closed TCP listener.
process.exit(code);
