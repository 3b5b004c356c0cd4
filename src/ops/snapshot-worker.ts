/**
 * The thread that copies the database for a backup (backup.ts): SQLite's `VACUUM INTO` on a
 * read-only connection of its own, one read transaction, so the copy is the database as one
 * moment left it, whatever the server commits meanwhile (WAL: its writers never wait for this
 * reader). On a thread of its own because bun:sqlite is synchronous and a large database takes
 * minutes: the backup's process renews its hold on deletions (src/blob/guard.ts) meanwhile.
 *
 * Listed as an entrypoint of the compiled binary (scripts/build.ts), as Bun needs for a worker.
 */
import { Database } from "bun:sqlite";

export interface SnapshotRequest {
  source: string;
  target: string;
}
export type SnapshotReply = { done: true } | { error: string };

declare const self: Worker;

function snapshot({ source, target }: SnapshotRequest): SnapshotReply {
  let db: Database | undefined;
  try {
    db = new Database(source, { readonly: true, strict: true });
    db.exec("PRAGMA busy_timeout = 5000");
    db.prepare("VACUUM INTO ?").run(target);
    return { done: true };
  } catch (err) {
    return { error: (err as Error).message };
  } finally {
    db?.close();
  }
}

self.onmessage = (event: MessageEvent<SnapshotRequest>) => {
  self.postMessage(snapshot(event.data));
};
