/**
 * The optional allow-list of D9 ("an optional allow-list limits which peers bitswap serves").
 *
 * @helia/bitswap 4 has no per-peer filter, so this is a libp2p connection gater: peers outside the
 * list cannot complete a connection in either direction, hence never reach bitswap (or identify,
 * or ping). The check runs once the remote peer id is authenticated by noise.
 */
import type { ConnectionGater, PeerId } from "@libp2p/interface";

export function allowListGater(allowPeers: readonly string[] | undefined): ConnectionGater {
  if (allowPeers === undefined) return {};
  const allowed = new Set(allowPeers);
  const deny = (peer: PeerId) => !allowed.has(peer.toString());
  return {
    denyDialPeer: deny,
    denyInboundEncryptedConnection: deny,
    denyOutboundEncryptedConnection: deny,
  };
}
