/**
 * `GET /healthz`: one entry per component, each checked with a time limit.
 * 200 when every component is ok, 503 otherwise, so a load balancer can read the status alone.
 *
 * @example
 *   app.use(healthRoutes({ db: () => { sqlite.query("select 1").get() } }))
 */
import { access } from "./openapi.ts";
import { Elysia, t, type Static } from "elysia";

/** Resolves with details when healthy; throws (or times out) when not. */
export type HealthCheck = () => unknown | Promise<unknown>;

const TIME_LIMIT_MS = 2000;

type ComponentHealth = { ok: boolean; ms: number; error?: string } & Record<string, unknown>;

async function runCheck(check: HealthCheck): Promise<ComponentHealth> {
  const started = performance.now();
  let timer: Timer | undefined;
  try {
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${TIME_LIMIT_MS} ms`)), TIME_LIMIT_MS);
    });
    const details = await Promise.race([Promise.resolve().then(check), timeout]);
    return { ok: true, ms: elapsed(started), ...(typeof details === "object" && details ? details : {}) };
  } catch (err) {
    return { ok: false, ms: elapsed(started), error: (err as Error).message };
  } finally {
    clearTimeout(timer);
  }
}

const elapsed = (since: number) => Math.round((performance.now() - since) * 100) / 100;

const component = t.Object({ ok: t.Boolean(), ms: t.Number(), error: t.Optional(t.String()) }, { additionalProperties: true });
const report = t.Object({ status: t.Union([t.Literal("ok"), t.Literal("degraded")]), version: t.String(), components: t.Record(t.String(), component) });

const CACHE_MS = 1000;

export const healthRoutes = (checks: Record<string, HealthCheck>, version: string) => {
  let last: { at: number; report: Promise<{ body: string; ok: boolean }> } | undefined;
  const check = async () => {
    const entries = await Promise.all(Object.entries(checks).map(async ([name, c]) => [name, await runCheck(c)] as const));
    const ok = entries.every(([, r]) => r.ok);
    const answer: Static<typeof report> = { status: ok ? "ok" : "degraded", version, components: Object.fromEntries(entries) };
    return { body: JSON.stringify(answer), ok };
  };
  return new Elysia({ name: "health" }).get(
    "/healthz",
    async () => {
      // Probes come often and some checks count rows: answer from a report at most 1 s old,
      // serialised once (a load balancer's probe then costs the listener, not the JSON).
      if (!last || performance.now() - last.at > CACHE_MS) last = { at: performance.now(), report: check() };
      const { body, ok } = await last.report;
      return new Response(body, { status: ok ? 200 : 503, headers: { "content-type": "application/json", "cache-control": "no-store" } });
    },
    {
      detail: { summary: "Health of each component", tags: ["operations"], ...access.public },
      response: { 200: report, 503: report },
    },
  );
};
