/** S3 access keys (D18): the service to build at start, the routes to mount, the S3 listener's lookup. */
export { createKeys, findAccessKey, findPinsToken, KEEP_DEAD_KEYS_MS, type AccessKey, type Keys, type KeysDeps } from "./service.ts";
export { keysRoutes } from "./routes.ts";
export type { ListedKey, MintedKey } from "./model.ts";
