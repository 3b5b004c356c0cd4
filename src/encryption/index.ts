/** Client-side encryption's gateway part (D20): wrapped identities and shares, stored opaque. */
export { createEncryption, EscrowRefused, type Encryption, type Escrow, type EscrowDeps, type Share, type StoredIdentity } from "./service.ts";
export { encryptionRoutes } from "./routes.ts";
export { gatewayIdentity } from "./gateway-identity.ts";
