/**
 * Puts and reads back a generated 256 MiB stream through the dfs store and prints the peak RSS
 * growth of each as JSON. It runs in a process of its own (spawned by memory.test.ts), so no other
 * test's memory counts against it. The read is consumed as the listener consumes a download: each
 * chunk given back (http/lent.ts) once used, so the growth is that of a download over HTTP. Its one
 * argument: the PostgreSQL database on the STOWAGE_TEST_DB=postgres pass (its parent's), or ''.
 */
import { giveBack } from "../../../src/http/lent.ts";
import { distinctStream, rssMeter } from "../../support/rss-probe.ts";
import { MiB, openStore } from "./support.ts";

const store = await openStore("local", { databaseUrl: process.argv[2] || undefined });
const rss = rssMeter();
const up = await store.dfs.put(distinctStream(256 * MiB, rss.sample));
await up.commit();
const putGrowth = rss.growth();
rss.reset(); // the read's own growth, from what is live after the put
let read = 0;
for await (const chunk of store.dfs.read(up.cid)) {
  read += chunk.byteLength;
  if (read % (16 * MiB) < chunk.byteLength) rss.sample();
  giveBack(chunk);
}
const readGrowth = rss.growth();
await store.close();
console.log(JSON.stringify({ size: up.size, read, putGrowth, readGrowth }));
process.exit(0);
