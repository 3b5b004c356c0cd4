/**
 * The node's libp2p identity: an Ed25519 key generated once and kept in `DATA_DIR/ipfs/peer.key`
 * (protobuf-encoded, mode 0600), so the peer id — which other nodes dial — survives restarts.
 *
 * A plain file rather than Helia's keychain: the keychain encrypts with a password we would have
 * to keep somewhere anyway, and a file is easy to back up and to check.
 */
import { generateKeyPair, privateKeyFromProtobuf, privateKeyToProtobuf } from "@libp2p/crypto/keys";
import type { PrivateKey } from "@libp2p/interface";
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { IpfsError } from "./errors.ts";

export async function loadOrCreatePeerKey(file: string): Promise<PrivateKey> {
  let bytes: Uint8Array | undefined;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  if (bytes) {
    try {
      return privateKeyFromProtobuf(bytes);
    } catch (err) {
      // Never replace a damaged key silently: the peer id is how others find this node.
      throw new IpfsError("IPFS_BAD_PEER_KEY", `cannot read the IPFS peer key ${file}`, { cause: err });
    }
  }
  const key = await generateKeyPair("Ed25519");
  writeDurably(file, privateKeyToProtobuf(key));
  return key;
}

/** Temporary name, fsync, rename: a crash leaves either no key or a whole one. */
function writeDurably(file: string, bytes: Uint8Array): void {
  const tmp = `${file}.${process.pid}.tmp`;
  const fd = openSync(tmp, "w", 0o600);
  try {
    writeSync(fd, bytes);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
}
