/**
 * Keeps the other gateways of a cluster dialled (STOWAGE_IPFS_PEERS, D16). Every gateway serves
 * every block of the shared blob store over bitswap; dialling each other makes the cluster one
 * well-connected set of peers for clients that reach any of them, and lets a gateway ask the
 * others while a block is still on its way to the shared store. A peer that is down is dialled
 * again on the next tick; its state changes are logged once, not at every tick.
 *
 * @example
 *   const peers = keepDialled(helia.libp2p, ["/ip4/10.0.0.2/tcp/4001/p2p/12D3Koo…"], log)
 *   peers.stop()
 */
import { multiaddr, type Multiaddr } from "@multiformats/multiaddr";
import { ConfigError } from "../../config.ts";
import type { Logger } from "../../log.ts";
import type { IpfsHelia } from "./node.ts";

const EVERY_MS = 5_000;

export interface DialledPeers {
  /** Peer ids currently connected, of those configured. */
  connected(): string[];
  stop(): void;
}

/** Parses the setting: every address must name its peer (`…/p2p/<id>`), or dialling cannot check who answers. */
export function parsePeerAddrs(addrs: readonly string[]): Multiaddr[] {
  return addrs.map((a) => {
    let ma: Multiaddr;
    try {
      ma = multiaddr(a);
    } catch (err) {
      throw new ConfigError(`STOWAGE_IPFS_PEERS: ${JSON.stringify(a)} is not a multiaddr (${(err as Error).message})`);
    }
    if (!ma.getComponents().some((c) => c.name === "p2p")) throw new ConfigError(`STOWAGE_IPFS_PEERS: ${JSON.stringify(a)} must end in /p2p/<peer id>`);
    return ma;
  });
}

export function keepDialled(libp2p: IpfsHelia["libp2p"], addrs: readonly Multiaddr[], log: Logger, everyMs = EVERY_MS): DialledPeers {
  const self = libp2p.peerId.toString();
  const targets = addrs.filter((ma) => peerOf(ma) !== self);
  const up = new Map<string, boolean>();
  let stopped = false;

  const tick = async () => {
    await Promise.all(
      targets.map(async (ma) => {
        const peer = peerOf(ma);
        if (libp2p.getConnections().some((c) => c.remotePeer.toString() === peer)) return note(peer, true);
        try {
          await libp2p.dial(ma, { signal: AbortSignal.timeout(everyMs) });
          note(peer, true);
        } catch (err) {
          note(peer, false, (err as Error).message);
        }
      }),
    );
  };
  const note = (peer: string, isUp: boolean, err?: string) => {
    if (stopped || up.get(peer) === isUp) return;
    up.set(peer, isUp);
    if (isUp) log.info("ipfs peer connected", { peer });
    else log.warn("ipfs peer unreachable, dialling again", { peer, err });
  };

  void tick();
  const timer = setInterval(() => void tick(), everyMs);
  timer.unref();
  return {
    connected: () => targets.map(peerOf).filter((p) => libp2p.getConnections().some((c) => c.remotePeer.toString() === p)),
    stop() {
      stopped = true;
      clearInterval(timer);
    },
  };
}

function peerOf(ma: Multiaddr): string {
  return ma.getComponents().findLast((c) => c.name === "p2p")?.value ?? "";
}
