/**
 * Which route answered a request, for the metrics' `route` label: the route's pattern
 * (`/:type/:cid`), never the raw path, whose Cids, ids and scanners' guesses would make a label
 * per request. Elysia knows the pattern once it has routed, so a global transform hook records it
 * where the fetch handler (http/handler.ts) reads it after the answer; unrouted requests are
 * "unmatched".
 *
 * @example
 *   const routes = routeLabels()
 *   new Elysia().use(routes.plugin).get("/dfs/:cid", …)
 *   routes.of(request) // "/dfs/:cid"
 */
import { Elysia } from "elysia";

export function routeLabels() {
  const seen = new WeakMap<Request, string>();
  const plugin = new Elysia({ name: "metrics-routes" }).onTransform({ as: "global" }, ({ request, route }) => {
    seen.set(request, route);
  });
  return { plugin, of: (request: Request) => seen.get(request) ?? "unmatched" };
}

export type RouteLabels = ReturnType<typeof routeLabels>;
