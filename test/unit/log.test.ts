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
