/**
 * The SDK's entry on Bun (packages/sdk's "bun" export condition, D19): the same API as index.ts,
 * with the payload's ChaCha20-Poly1305 in the system's libsodium through Bun's FFI where it loads
 * (aead-native.ts: ≈ 4× its WASM build, what brings an encrypted transfer near a plain one, issue
 * 16), as the command line has it; libsodium's WASM where the library is missing. A module of its
 * own because index.ts must import no runtime-only module: Node and browsers resolve that one and
 * never see `bun:ffi`. usePayloadAead still pins another.
 */
import { nativeAead } from "./aead-native.ts";
import { offerPayloadAead } from "./aead.ts";

export * from "./index.ts";

offerPayloadAead(nativeAead);
