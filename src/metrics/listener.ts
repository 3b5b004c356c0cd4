/**
 * `GET /metrics` on a listener of its own (`STOWAGE_METRICS_LISTEN`, default 127.0.0.1:9464), never
 * on the public port: the figures tell an outsider how busy the gateway is and which routes fail.
 *
 * @example
 *   const served = serveMetrics("127.0.0.1:0", metrics.registry)
 *   await fetch(`${served.url}/metrics`)
 */
import type { Registry } from "prom-client";

export interface MetricsListener {
  url: string;
  stop(): Promise<void>;
}

/** `address` is HOST:PORT as the config checked it (`[::1]:9464` for IPv6); port 0 picks a free one. */
export function serveMetrics(address: string, registry: Registry): MetricsListener {
  const at = address.lastIndexOf(":");
  const hostname = address.slice(0, at).replace(/^\[(.*)\]$/, "$1");
  const server = Bun.serve({
    hostname,
    port: Number(address.slice(at + 1)),
    async fetch(request) {
      const { pathname } = new URL(request.url);
      if (pathname !== "/metrics") return new Response("not found: the metrics are at /metrics\n", { status: 404 });
      if (request.method !== "GET" && request.method !== "HEAD") return new Response("method not allowed\n", { status: 405, headers: { allow: "GET, HEAD" } });
      return new Response(await registry.metrics(), { headers: { "content-type": registry.contentType } });
    },
  });
  const host = hostname.includes(":") ? `[${hostname}]` : hostname;
  return { url: `http://${host}:${server.port}`, stop: () => server.stop(true) };
}
