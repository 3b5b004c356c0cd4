/**
 * The SDK's entry on Node (packages/sdk's "node" export condition, D19): the same API as index.ts,
 * with the payload's ChaCha20-Poly1305 in Node's own crypto (aead-node.ts: ≈ 5× libsodium's WASM
 * build). A module of its own because index.ts must import no runtime-only module:
 * browsers (and other runtimes, through "import") resolve a build of that one and never see
 * node:crypto. usePayloadAead still pins another.
 */
import { nodeAead } from "./aead-node.ts";
import { offerPayloadAead } from "./aead.ts";

export * from "./index.ts";

offerPayloadAead(nodeAead);
