/**
 * This gateway's name in the cluster's lease rows (D16): a random id made once in the data dir
 * (`DATA_DIR/gateway-id`). Per data dir, not per process: the data-dir lock lets one process at a
 * time use it, so a gateway restarted after a crash is the same holder and takes its leases (the
 * indexer, the sweeps) back at once instead of waiting out its own dead term; another gateway of
 * the cluster has another data dir and so another id.
 */
import { closeSync, existsSync, openSync, readFileSync, writeSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";

export function gatewayId(dataDir: string): string {
  const path = join(dataDir, "gateway-id");
  try {
    const fd = openSync(path, "wx", 0o600);
    // The host name only helps a reader of the leases table; the random part makes it unique.
    writeSync(fd, `${hostname()}/${crypto.randomUUID()}\n`);
    closeSync(fd);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
  const id = readFileSync(path, "utf8").trim();
  if (!id) throw new Error(`${path} is empty: remove it and start again`);
  return id;
}

/** The data dir's gateway id if it has one (never makes one). */
export function readGatewayId(dataDir: string): string | undefined {
  const path = join(dataDir, "gateway-id");
  return existsSync(path) ? readFileSync(path, "utf8").trim() || undefined : undefined;
}
