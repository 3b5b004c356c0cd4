/**
 * Builds the embedded Helia node the way DESIGN.md's pitfalls say: a light Helia + libp2p +
 * `withBitswap`, with stores we open ourselves. `createHelia` would pull in UPnP, whose SSDP module
 * reads `../../package.json` at load and kills the compiled binary.
 *
 * Helia's class and its libp2p router come from their own files, not from the entry points of
 * `helia` and `@helia/libp2p`: those also import libp2p's default configuration (DHT, WebRTC and
 * its native module, circuit relay, AutoTLS with an ACME client, HTTP gateways, …), ≈ 600 modules
 * and ≈ 22 MiB of the server's idle RSS, none of which this node starts. Both packages are pinned
 * exactly (package.json); test/storage/ipfs and test/gateway start this node.
 *
 * libp2p: TCP only, noise with the WASM ChaCha20-Poly1305 (Bun's node:crypto has none, and noise
 * would fail every message of 1200 bytes or more), yamux, identify and ping. No DHT, no mDNS, no
 * bootstrap list, no UPnP: this node is dialled by the peers that need it (D9).
 *
 * Blocks live where the caller says (the server: the blob store, blocks.ts; without one, as for
 * the out-of-process test peer, Helia keeps them in memory). Local to this node in `dir` (the
 * back-end's folder, normally DATA_DIR/ipfs): `datastore/` and `peer.key`. Also used by the test
 * peer, so both ends are built the same way.
 */
import type { HeliaWithLibp2p } from "@helia/libp2p";
import { identify, type Identify } from "@libp2p/identify";
import { noise } from "@libp2p/noise";
import { asCrypto, defaultCrypto } from "@libp2p/noise/crypto";
import { ping, type Ping } from "@libp2p/ping";
import { tcp } from "@libp2p/tcp";
import { yamux } from "@libp2p/yamux";
import { FsDatastore } from "datastore-fs";
import type { HeliaInit } from "helia";
import type { CID } from "multiformats/cid";
import { createLibp2p, type Libp2pOptions } from "libp2p";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { allowListGater } from "./gater.ts";
import { loadOrCreatePeerKey } from "./peer-key.ts";
// See the header: the files behind `createHeliaLight` (helia 7.1.15) and `withLibp2pLight`
// (@helia/libp2p 2.1.4), without their packages' entry points.
import { Helia } from "../../../node_modules/helia/dist/src/helia.js";
import { libp2pRouting } from "../../../node_modules/@helia/libp2p/dist/src/routing.js";
// What `withBitswap` (@helia/bitswap 4.0.19) adds, made here so the node keeps the broker: a pin
// asks it for blocks itself (Helia's networked blockstore would write them into the blob store
// outside an upload's lease, which BlobBlockstore refuses).
import { BitswapBlockBroker } from "../../../node_modules/@helia/bitswap/dist/src/block-broker.js";
import { start as startService, type AbortOptions } from "@libp2p/interface";

export interface NodeOptions {
  /** The back-end's folder (created 0700 if missing). */
  dir: string;
  /** libp2p listen multiaddrs, e.g. `/ip4/0.0.0.0/tcp/4001`. */
  listen: readonly string[];
  /** When set, only these peer ids may connect (and so be served by bitswap). */
  allowPeers?: readonly string[];
  /** Where blocks are read (and, for a fetching peer, kept); unset = in memory. */
  blockstore?: HeliaInit["blockstore"];
}

export type IpfsServices = { identify: Identify; ping: Ping };
export type IpfsHelia = HeliaWithLibp2p<IpfsServices>;

export interface IpfsNode {
  helia: IpfsHelia;
  /** A block from the connected peers over bitswap (verified against its Cid by bitswap). */
  want(cid: CID, options: AbortOptions): Promise<Uint8Array>;
  /** Stops Helia, then closes the datastore. */
  stop(): Promise<void>;
}

/** Noise crypto for Bun: node:crypto for X25519 and SHA-256, WASM for ChaCha20-Poly1305. */
const noiseCrypto = {
  ...defaultCrypto,
  chaCha20Poly1305Encrypt: asCrypto.chaCha20Poly1305Encrypt,
  chaCha20Poly1305Decrypt: asCrypto.chaCha20Poly1305Decrypt,
};

export async function startIpfsNode(opts: NodeOptions): Promise<IpfsNode> {
  mkdirSync(opts.dir, { recursive: true, mode: 0o700 });
  const datastore = new FsDatastore(join(opts.dir, "datastore"));
  await datastore.open();
  const closeStores = () => datastore.close();

  let helia: IpfsHelia | undefined;
  let broker: BitswapBlockBroker | undefined;
  try {
    const privateKey = await loadOrCreatePeerKey(join(opts.dir, "peer.key"));
    helia = withBitswapBroker(
      withLibp2p(new Helia({ name: "helia", version: HELIA_VERSION, blockstore: opts.blockstore, datastore }), {
        privateKey,
        datastore,
        addresses: { listen: [...opts.listen] },
        transports: [tcp()],
        connectionEncrypters: [noise({ crypto: noiseCrypto })],
        streamMuxers: [yamux()],
        connectionGater: allowListGater(opts.allowPeers),
        services: { identify: identify(), ping: ping() },
      }),
      (made) => (broker = made),
    );
    await helia.start();
  } catch (err) {
    await helia?.stop().catch(() => {});
    await closeStores();
    throw err;
  }
  const started = helia;
  return {
    helia: started,
    want(cid, options) {
      if (!broker) throw new Error("the IPFS node has no bitswap");
      return broker.retrieve(cid, options);
    },
    async stop() {
      await started.stop();
      await closeStores();
    },
  };
}

/** `withBitswap` of @helia/bitswap, handing the broker it makes to `made`. */
function withBitswapBroker(helia: IpfsHelia, made: (broker: BitswapBlockBroker) => void): IpfsHelia {
  const node = helia as unknown as Helia;
  node.addMixin({
    name: "bitswap",
    start: async () => {
      if (node.hasBlockBroker("bitswap")) return;
      const broker = new BitswapBlockBroker(helia as unknown as ConstructorParameters<typeof BitswapBlockBroker>[0]);
      await startService(broker);
      node.addBlockBroker(broker);
      made(broker);
    },
  });
  return helia;
}

/** The version `createHeliaLight` would give the node's `info` (the pinned helia). */
const HELIA_VERSION = "7.1.15";

/**
 * `withLibp2pLight` of @helia/libp2p 2.1.4 for this node: a mixin that creates libp2p from
 * `options` when Helia starts (so after the datastore is open), adds the libp2p router and
 * starts it with Helia. Not copied: loading a peer key from Helia's keychain (ours comes from
 * peer.key) and the overrides that put peers other routers find into the peer store (this node
 * has no other router).
 */
function withLibp2p(helia: Helia, options: Libp2pOptions<IpfsServices>): IpfsHelia {
  let libp2p: IpfsHelia["libp2p"] | undefined;
  Object.defineProperty(helia, "libp2p", {
    configurable: true,
    enumerable: true,
    get() {
      if (libp2p === undefined) throw new Error("the IPFS node has not started");
      return libp2p;
    },
  });
  helia.addMixin({
    name: "libp2p",
    start: async () => {
      libp2p ??= await createLibp2p(options);
      if (!helia.hasRouter("libp2p-router")) helia.addRouter(libp2pRouting(libp2p));
      await libp2p.start();
    },
    stop: async () => {
      await libp2p?.stop();
    },
  });
  return helia as Helia & IpfsHelia;
}
