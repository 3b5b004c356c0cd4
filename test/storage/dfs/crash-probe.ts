/**
 * The process crash.test.ts kills: over the data dir and blob store it is given, it commits one
 * file, then starts a second upload whose source sends 4 MiB and then never ends, waits until
 * that upload's chunks are in the blob store, prints "ready" and waits to be killed (SIGKILL:
 * no stop, no abort, no lease release). A real process, so nothing of its in-memory state
 * survives into the reopened store.
 *
 * Run: bun crash-probe.ts ROOT SEED '<S3BlobStoreOptions as JSON>' (or '' for the local store)
 *   DATABASE_URL (PostgreSQL on the STOWAGE_TEST_DB=postgres pass, the variable passed on; or '')
 */
import { LocalBlobStore, localBlobRoot, S3BlobStore } from "../../../src/blob/index.ts";
import { MiB, bytesOf, chunkKeys, openStore, streamOf } from "./support.ts";

const [root, seedArg, s3, databaseUrl] = process.argv.slice(2) as [string, string, string, string];
const seed = Number(seedArg);
const blobs = s3 ? new S3BlobStore(JSON.parse(s3)) : new LocalBlobStore(localBlobRoot(root));
const store = await openStore(s3 ? "s3" : "local", { root, blobs, databaseUrl: databaseUrl || undefined });

const kept = bytesOf(2 * MiB + 7, seed);
const up = await store.dfs.put(streamOf(kept));
await up.commit();

// Shares its first chunk with `kept`; three chunks of its own reach the store before it hangs.
const lost = Buffer.concat([kept.subarray(0, MiB), bytesOf(3 * MiB, seed + 1)]);
let at = 0;
const hanging = new ReadableStream<Uint8Array>({
  pull(c) {
    if (at >= lost.length) return new Promise<void>(() => {}); // a client that stops sending
    c.enqueue(lost.subarray(at, at + MiB));
    at += MiB;
  },
});
void store.dfs.put(hanging);
while ((await chunkKeys(store)).length < 3 + 3) await Bun.sleep(10);
console.log(JSON.stringify({ ready: true, cid: up.cid }));
await new Promise(() => {});
