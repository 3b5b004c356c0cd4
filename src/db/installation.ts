/**
 * The installation id: made once per data directory, so clients and operators can tell two
 * gateways (or a wiped data dir) apart.
 */
import { eq } from "drizzle-orm";
import type { Db } from "./open.ts";
import { appState } from "./schema.ts";

export function installationId(db: Db): string {
  db.insert(appState).values({ key: "installation_id", value: crypto.randomUUID(), updatedAt: Date.now() }).onConflictDoNothing().run();
  return db.select().from(appState).where(eq(appState.key, "installation_id")).get()!.value;
}
