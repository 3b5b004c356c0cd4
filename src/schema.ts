/**
 * The database schema of the whole server. Each capability keeps its tables in its own folder's
 * `schema.ts`; this file gathers them so drizzle-kit generates one migration history. It lives
 * above the folders (not in src/db/) because it imports them all, and they all use src/db/: from
 * inside src/db/ it would tie every folder into one import cycle.
 */
export * from "./db/schema.ts";
export * from "./accounts/schema.ts";
export * from "./chain/schema.ts";
export * from "./blob/schema.ts";
export * from "./storage/dfs/schema.ts";
export * from "./storage/ipfs/schema.ts";
export * from "./storage/schema.ts";
export * from "./authorities/schema.ts";
export * from "./quota/schema.ts";
export * from "./directory/schema.ts";
export * from "./encryption/schema.ts";
export * from "./keys/schema.ts";
export * from "./gateway/schema.ts";
export * from "./s3api/schema.ts";
export * from "./grants/schema.ts";
export * from "./denylist/schema.ts";
export * from "./pins/schema.ts";
