/**
 * Puts and reads back a generated 384 MiB stream through the ipfs back-end (blocks on local
 * files) and prints the peak RSS growth as JSON. It runs in a process of its own (spawned by
 * memory.test.ts), so no other test's memory counts against it. The read is consumed as the
 * listener consumes a download: each chunk given back (http/lent.ts) once used, so the growth is
 * that of a download over HTTP. Its one argument: the PostgreSQL database on the
 * STOWAGE_TEST_DB=postgres pass (its parent's), or ''.
 */
import { join } from "node:path";
import { LocalBlobStore } from "../../../src/blob/local.ts";
import { giveBack } from "../../../src/http/lent.ts";
import { distinctStream, rssMeter } from "../../support/rss-probe.ts";
import { tempDir } from "../../support/tmp.ts";
import { MiB, openBackend } from "./helpers.ts";

const dataDir = tempDir("ipfs-memory");
const o = await openBackend(dataDir, { store: new LocalBlobStore(join(dataDir, "blobs")), databaseUrl: process.argv[2] || undefined });
const whole = rssMeter();
const up = await o.ipfs.put(distinctStream(384 * MiB, whole.sample));
await up.commit();
const putGrowth = whole.growth();
// The read's own growth: from what the put left once collected.
const reading = rssMeter();
const both = { sample: () => (whole.sample(), reading.sample()) };
let read = 0;
for await (const chunk of o.ipfs.read(up.cid)) {
  read += chunk.byteLength;
  if (read % (16 * MiB) < chunk.byteLength) both.sample();
  giveBack(chunk);
}
await o.close();
console.log(JSON.stringify({ size: up.size, read, putGrowth, readGrowth: reading.growth(), growth: whole.growth() }));
process.exit(0);
