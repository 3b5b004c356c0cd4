import { expect, test } from "bun:test";
import { createLogger } from "../../src/log.ts";

test("log lines are JSON and never carry secret-looking fields", () => {
  const lines: string[] = [];
  const log = createLogger("info", (l) => lines.push(l));
  log.debug("hidden");
  log.info("login", { did: "did:ethr:0x3d9:0xabc", token: "aa", signature: "0x1", sign: "0x2", accessToken: "x", code: "123456", signal: "SIGTERM", status: 200 });
  expect(lines).toHaveLength(1);
  const entry = JSON.parse(lines[0] as string);
  expect(entry).toMatchObject({ level: "info", msg: "login", did: "did:ethr:0x3d9:0xabc", signal: "SIGTERM", status: 200 });
  for (const k of ["token", "signature", "sign", "accessToken", "code"]) expect(entry[k]).toBe("[redacted]");
});

test("stdout lines written a turn of the loop at a time keep their order, go before a direct write after flushLogs, and are all out at exit", async () => {
  // A process of its own: the default writer is its stdout. It logs, flushes, prints directly,
  // logs a burst and exits in the same turn, before any batch was written.
  const script = `
    import { createLogger, flushLogs } from ${JSON.stringify(`${import.meta.dir}/../../src/log.ts`)};
    const log = createLogger("info");
    log.info("first"); log.info("second");
    flushLogs();
    console.log("direct");
    for (let i = 0; i < 500; i++) log.info("burst", { i });
    process.exit(0);
  `;
  const proc = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect(err).toBe("");
  expect(code).toBe(0);
  const lines = out.trimEnd().split("\n");
  expect(lines.slice(0, 3).map((l) => (l.startsWith("{") ? JSON.parse(l).msg : l))).toEqual(["first", "second", "direct"]);
  const burst = lines.slice(3).map((l) => JSON.parse(l) as { msg: string; i: number });
  expect(burst.map((e) => e.i)).toEqual(Array.from({ length: 500 }, (_, i) => i));
});
