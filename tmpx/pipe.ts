import { SQL } from "bun";
import { postgres } from "../test/support/postgres.ts";
const pg = await postgres();
const url = await pg.createDatabase();
const c = new SQL(url, { max: 4, bigint: true });
await c.unsafe("CREATE TABLE t (k text primary key, v int)");
await c.unsafe("INSERT INTO t VALUES ('a', 1)");
const N = 3000;
async function viaBegin() {
  await c.begin("isolation level read committed", async (tx) => { await tx.unsafe("SELECT v FROM t WHERE k = $1", ["a"]); });
}
async function viaReserve() {
  const r = await c.reserve();
  try {
    const b = r.unsafe("BEGIN ISOLATION LEVEL READ COMMITTED");
    const s = r.unsafe("SELECT v FROM t WHERE k = $1", ["a"]);
    await b; await s;
    await r.unsafe("COMMIT");
  } finally { r.release(); }
}
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
for (const [name, f] of [["begin", viaBegin], ["reserve", viaReserve], ["begin", viaBegin], ["reserve", viaReserve]] as const) {
  const pids = pg.pids();
  const pgcpu = () => pids.reduce((s, p) => { try { const f = require("fs").readFileSync(`/proc/${p}/stat`, "utf8").split(") ")[1].split(" "); return s + (Number(f[11]) + Number(f[12])) * 10; } catch { return s; } }, 0);
  const t0 = performance.now(), c0 = cpu(), p0 = pgcpu();
  for (let i = 0; i < N; i++) await f();
  console.log(name, "wall µs", ((performance.now() - t0) * 1000 / N).toFixed(1), "client cpu µs", ((cpu() - c0) * 1000 / N).toFixed(1), "pg cpu µs", ((pgcpu() - p0) * 1000 / N).toFixed(1));
}
await c.close(); await pg.stop();
