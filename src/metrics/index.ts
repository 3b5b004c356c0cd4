/**
 * Prometheus metrics (D19): the registry and its hooks, the route label, and the listener.
 *
 * @example
 *   const metrics = createMetrics()
 *   const served = serveMetrics(config.metricsListen, metrics.registry)
 */
export { createMetrics, type Metrics, type GaugeSources, type UsageTotals } from "./registry.ts";
export { routeLabels, type RouteLabels } from "./routes.ts";
export { serveMetrics, type MetricsListener } from "./listener.ts";
export { readAtMostEvery } from "./every.ts";
