/**
 * The database's own table. Every capability keeps its tables in its own folder's `schema.ts`;
 * src/schema.ts gathers them all for drizzle-kit (add a new capability's tables there).
 */
import { sqliteTable, text, integer } from "drizzle-orm/sqlite-core";

/** Small facts about this installation (schema-independent key/value pairs). */
export const appState = sqliteTable("app_state", {
  key: text("key").primaryKey(),
  value: text("value").notNull(),
  updatedAt: integer("updated_at").notNull(),
});
