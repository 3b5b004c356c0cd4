/**
 * The database schema. Each capability keeps its tables in its own folder's `schema.ts`; this file
 * gathers them so drizzle-kit generates one migration history and `Db` knows every table.
 */
import { sqliteTable, text, integer } from "drizzle-orm/sqlite-core";

/** Small facts about this installation (schema-independent key/value pairs). */
export const appState = sqliteTable("app_state", {
  key: text("key").primaryKey(),
  value: text("value").notNull(),
  updatedAt: integer("updated_at").notNull(),
});

export * from "../accounts/schema.ts";

export * from "../chain/schema.ts";

export * from "../blob/schema.ts";

export * from "../storage/dfs/schema.ts";

export * from "../storage/ipfs/schema.ts";
export * from "../storage/schema.ts";
export * from "../quota/schema.ts";
export * from "../directory/schema.ts";
