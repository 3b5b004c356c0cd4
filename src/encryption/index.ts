/** Client-side encryption's gateway part (D20): wrapped identities and shares, stored opaque. */
export { createEncryption, type Encryption, type Share, type StoredIdentity } from "./service.ts";
export { encryptionRoutes } from "./routes.ts";
