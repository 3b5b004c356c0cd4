/**
 * The installation id: made once per deployment, so clients and operators can tell two
 * deployments (or a wiped database) apart. Gateways sharing a database (D16) share it: the first
 * to start makes it, and a racing start keeps the one already written.
 */
import type { Queryable } from "./sql.ts";

const MAKE = "INSERT INTO app_state (key, value, updated_at) VALUES ('installation_id', $1, $2) ON CONFLICT (key) DO NOTHING";
const READ = "SELECT value FROM app_state WHERE key = 'installation_id'";

export async function installationId(sql: Queryable): Promise<string> {
  await sql.run(MAKE, [crypto.randomUUID(), Date.now()]);
  const row = await sql.get<{ value: string }>(READ);
  if (!row) throw new Error("app_state has no installation_id right after making one");
  return row.value;
}

/** The installation id if one was made (never makes one: a copy of the database is read as it is). */
export async function readInstallationId(sql: Queryable): Promise<string | undefined> {
  return (await sql.get<{ value: string }>(READ))?.value;
}
