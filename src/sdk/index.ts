/**
 * The SDK's public API in one entry (D19): what packages/sdk builds and publishes as @stowage/sdk.
 * Every module here runs on Node ≥ 20, Bun and browsers; runtime-only conveniences (a file path read
 * with Bun.file, Bun's native hasher) sit behind a runtime check, never behind an import.
 */
export * from "./account.ts";
export * from "./keys.ts";
export * from "./grants.ts";
export * from "./recap.ts";
export * from "./storage.ts";
export * from "./chain.ts";
export * from "./key-agreement.ts";
export * from "./directory.ts";
export * from "./encryption.ts";
export * from "./age.ts";
export * from "./aead.ts";
export * from "./spool.ts";
// Two modules name a quota record: the gateway's answer (storage) and the chain's (chain).
export type { QuotaRecord } from "./storage.ts";
export type { QuotaRecord as ChainQuotaRecord } from "./chain.ts";
