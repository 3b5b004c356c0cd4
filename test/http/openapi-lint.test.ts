/**
 * The OpenAPI document the compiled server serves (D19) passes Redocly's recommended rules
 * (redocly.yaml): every operation says how it is authorised (security schemes), what it answers on
 * success and on failure, and the storage type is an enum. The only warnings allowed are of the two
 * operations that have no 4xx answer at all. The /openapi page loads its script and style from the
 * binary, not a CDN.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { startBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";

const ROOT = join(import.meta.dir, "..", "..");
const REDOCLY = join(ROOT, "node_modules", "@redocly", "cli", "bin", "cli.js");

/** Operations that cannot fail with a 4xx: health answers 200 or 503, /chain only 200. */
const NO_4XX = ["#/paths/~1healthz/get/responses", "#/paths/~1chain/get/responses", "#/paths/~1console/get/responses"];

interface Problem {
  ruleId: string;
  severity: "error" | "warn";
  message: string;
  location: { pointer: string }[];
}

test("the served OpenAPI document passes redocly lint with the recommended rules; its page loads nothing from a CDN", async () => {
  const work = tempDir("openapi");
  const server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", join(work, "data")]);
  let spec: Record<string, unknown>;
  try {
    spec = (await (await fetch(`${server.url}/openapi/json`)).json()) as Record<string, unknown>;
    // The page itself loads its script and style from this server, never a CDN (works offline).
    const page = await (await fetch(`${server.url}/openapi`)).text();
    const assets = [...page.matchAll(/<(?:script|link)[^>]+(?:src|href)="([^"]+)"/g)].map((m) => m[1] as string);
    expect(assets.length).toBe(2);
    for (const asset of assets) {
      expect(asset).toStartWith("/openapi/");
      const res = await fetch(`${server.url}${asset}`);
      expect(res.status).toBe(200);
      expect((await res.arrayBuffer()).byteLength).toBeGreaterThan(100_000);
    }
  } finally {
    await server.stop();
  }
  const file = join(work, "openapi.json");
  await Bun.write(file, JSON.stringify(spec, null, 1));
  // Redocly runs on Node (the README's only requirement), as its users run it.
  const lint = Bun.spawn(["node", REDOCLY, "lint", file, "--config", join(ROOT, "redocly.yaml"), "--format", "json"], { cwd: work, stdout: "pipe", stderr: "pipe" });
  const [out, err] = await Promise.all([new Response(lint.stdout).text(), new Response(lint.stderr).text(), lint.exited]);
  let report: { totals: { errors: number; warnings: number }; problems: Problem[] };
  try {
    report = JSON.parse(out);
  } catch {
    throw new Error(`redocly gave no JSON report:\n${out}\n${err}`);
  }
  const listed = (p: Problem) => `${p.severity} ${p.ruleId} ${p.location[0]?.pointer}: ${p.message}`;
  expect(report.problems.filter((p) => p.severity === "error").map(listed)).toEqual([]);
  expect(report.problems.filter((p) => !(p.ruleId === "operation-4xx-response" && NO_4XX.includes(p.location[0]?.pointer ?? ""))).map(listed)).toEqual([]);

  // What the lint does not check but D19 asks for: the storage type is an enum.
  const upload = (spec.paths as Record<string, Record<string, { parameters?: { name: string; schema: { enum?: string[] } }[] }>>)["/{type}"]?.post;
  expect(upload?.parameters?.find((p) => p.name === "type")?.schema.enum).toEqual(["dfs", "ipfs"]);
}, 60_000);
