/**
 * Puts and reads back a generated 256 MiB stream through the dfs store and prints the peak RSS
 * growth as JSON. It runs in a process of its own (spawned by memory.test.ts), so no other test's
 * memory counts against it. Its one argument: the PostgreSQL database on the STOWAGE_TEST_DB=postgres
 * pass (its parent's), or ''.
 */
import { distinctStream, drain, rssMeter } from "../../support/rss-probe.ts";
import { MiB, openStore } from "./support.ts";

const store = await openStore("local", { databaseUrl: process.argv[2] || undefined });
const rss = rssMeter();
const up = await store.dfs.put(distinctStream(256 * MiB, rss.sample));
await up.commit();
const putGrowth = rss.growth();
const read = await drain(store.dfs.read(up.cid), rss);
await store.close();
console.log(JSON.stringify({ size: up.size, read, putGrowth, growth: rss.growth() }));
process.exit(0);
