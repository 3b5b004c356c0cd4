/**
 * The gateway's Prometheus metrics (D19): one registry per server, never prom-client's global one,
 * so two servers in one process (tests) do not mix their counts. Counters move where the work
 * happens (a hook each service is handed); gauges that describe shared state (live reservations,
 * indexer lag, peers) are read when scraped, so they cost nothing between scrapes.
 *
 * @example
 *   const metrics = createMetrics()
 *   metrics.request("GET", "/dfs/:cid", 200, 0.004)
 *   metrics.gauges({ peers: async () => 3 })
 *   await metrics.registry.metrics() // the text exposition
 */
import { Counter, Gauge, Histogram, Registry } from "prom-client";

export type Direction = "in" | "out";

/** What the scrape-time gauges read; each is optional, and a failing read leaves its gauge out. */
export interface GaugeSources {
  /** Live quota reservations by pool ("space", "traffic"): count and bytes held. */
  reservations?: () => Promise<{ pool: string; count: number; bytes: number }[]>;
  /** Blocks between the chain head and the slowest indexer cursor. */
  indexerLag?: () => Promise<number | undefined>;
  /** Connected libp2p peers of this gateway's IPFS node. */
  peers?: () => Promise<number>;
  /** The deployment's usage totals (the usage report's, without any account named). */
  usage?: () => Promise<UsageTotals>;
  /** Pin requests of every account, by status (queued, pinning, pinned, failed). */
  pins?: () => Promise<Record<string, number>>;
  /** Denylist rules in force, by source ("files", "operator"). */
  denylist?: () => { files: number; operator: number };
}

/** What `stowage admin usage` totals (src/ops/usage.ts gives this shape). */
export interface UsageTotals {
  /** Files and bytes stored, per back-end. */
  stored: { backend: string; files: number; bytes: number }[];
  /** Accounts with at least one file. */
  accounts: number;
  /** Bytes moved by every account in its current traffic period. */
  trafficPeriodBytes: number;
  /** Purchases and free grants indexed from the chain, by kind and pool: how many, and bytes. */
  quota: { kind: string; pool: string; events: number; bytes: number }[];
  /** S3 access keys that work now (not the Pinning Service API's tokens). */
  s3Keys: number;
  /** Pinning Service API tokens that work now. */
  pinTokens: number;
}

/** Request durations: from a cached health check (≈ 0.1 ms) to a large transfer (minutes). */
const DURATION_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
/** Chain calls: an in-process call (≈ 0.1 ms) to a slow remote node. */
const RPC_BUCKETS = [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export function createMetrics() {
  const registry = new Registry();
  const registers = [registry];
  const sources: GaugeSources = {};

  const requests = new Counter({ name: "stowage_http_requests_total", help: "HTTP requests answered, by method, route and status", labelNames: ["method", "route", "status"], registers });
  const durations = new Histogram({ name: "stowage_http_request_duration_seconds", help: "Time to the response's headers, by method and route", labelNames: ["method", "route"], buckets: DURATION_BUCKETS, registers });
  const bytes = new Counter({ name: "stowage_transfer_bytes_total", help: "File bytes received (in) and sent (out), by back-end", labelNames: ["backend", "direction"], registers });
  const purchases = new Counter({ name: "stowage_purchases_total", help: "Space and traffic purchases by the operator key, by kind and outcome", labelNames: ["kind", "outcome"], registers });
  const blocked = new Counter({ name: "stowage_blocked_requests_total", help: "Requests refused because the denylist blocks their content (410), by door: download, s3, trustless, path, bitswap, upload, pin, import", labelNames: ["door"], registers });
  const rpc = new Histogram({ name: "stowage_chain_rpc_duration_seconds", help: "Chain JSON-RPC calls, by method and outcome", labelNames: ["method", "outcome"], buckets: RPC_BUCKETS, registers });

  new Gauge({
    name: "stowage_quota_reservations",
    help: "Live quota reservations (uploads and downloads in flight, cluster-wide), by pool",
    labelNames: ["pool"],
    registers,
    async collect() {
      this.reset();
      for (const r of (await sources.reservations?.().catch(() => [])) ?? []) this.set({ pool: r.pool }, r.count);
    },
  });
  new Gauge({
    name: "stowage_quota_reserved_bytes",
    help: "Bytes held by live quota reservations (cluster-wide), by pool",
    labelNames: ["pool"],
    registers,
    async collect() {
      this.reset();
      for (const r of (await sources.reservations?.().catch(() => [])) ?? []) this.set({ pool: r.pool }, r.bytes);
    },
  });
  new Gauge({
    name: "stowage_indexer_lag_blocks",
    help: "Blocks between the chain head and the slowest event-indexer cursor",
    registers,
    async collect() {
      this.reset();
      const lag = await sources.indexerLag?.().catch(() => undefined);
      if (lag !== undefined) this.set(lag);
    },
  });
  new Gauge({
    name: "stowage_ipfs_peers",
    help: "libp2p peers this gateway's IPFS node is connected to",
    registers,
    async collect() {
      this.reset();
      const n = await sources.peers?.().catch(() => undefined);
      if (n !== undefined) this.set(n);
    },
  });
  new Gauge({
    name: "stowage_pin_requests",
    help: "Pin requests of the Pinning Service API (cluster-wide), by status: queued, pinning, pinned, failed",
    labelNames: ["status"],
    registers,
    async collect() {
      this.reset();
      const counts = await sources.pins?.().catch(() => undefined);
      if (counts) for (const [status, n] of Object.entries(counts)) this.set({ status }, n);
    },
  });
  new Gauge({
    name: "stowage_denylist_rules",
    help: "Denylist rules in force, by source: the STOWAGE_DENYLIST files, and the operator's own blocks",
    labelNames: ["source"],
    registers,
    collect() {
      this.reset();
      const size = sources.denylist?.();
      if (size) for (const [source, n] of Object.entries(size)) this.set({ source }, n);
    },
  });
  usageGauges(registers, () => sources.usage);
  processGauges(registers);

  return {
    registry,
    request(method: string, route: string, status: number, seconds: number) {
      requests.inc({ method, route, status: String(status) });
      durations.observe({ method, route }, seconds);
    },
    transferred(backend: string, direction: Direction, n: number) {
      if (n > 0) bytes.inc({ backend, direction }, n);
    },
    /** A request refused by the denylist, at `door`. */
    blocked(door: string) {
      blocked.inc({ door });
    },
    purchase(kind: string, outcome: "done" | "failed") {
      purchases.inc({ kind, outcome });
    },
    rpc(method: string, seconds: number, ok: boolean) {
      rpc.observe({ method, outcome: ok ? "ok" : "error" }, seconds);
    },
    /** Wires the scrape-time gauges once their sources exist (the server starts them later). */
    gauges(more: GaugeSources) {
      Object.assign(sources, more);
    },
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/**
 * The usage report's totals as gauges (no label names an account: one series per back-end or pool,
 * whatever the number of users). One read of the totals serves every gauge of a scrape: the first
 * gauge collected starts it, the others wait for the same answer.
 */
function usageGauges(registers: Registry[], source: () => GaugeSources["usage"]) {
  let pending: { at: number; totals: Promise<UsageTotals | undefined> } | undefined;
  const totals = () => {
    const read = source();
    if (!read) return Promise.resolve(undefined);
    if (!pending || performance.now() - pending.at > 1000) pending = { at: performance.now(), totals: read().catch(() => undefined) };
    return pending.totals;
  };
  const gauge = (name: string, help: string, labelNames: string[], set: (g: Gauge, t: UsageTotals) => void) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers,
      async collect() {
        this.reset();
        const t = await totals();
        if (t) set(this, t);
      },
    });
  gauge("stowage_stored_files", "Files stored, by back-end (all accounts)", ["backend"], (g, t) => t.stored.forEach((s) => g.set({ backend: s.backend }, s.files)));
  gauge("stowage_stored_bytes", "Bytes of files stored, by back-end (all accounts)", ["backend"], (g, t) => t.stored.forEach((s) => g.set({ backend: s.backend }, s.bytes)));
  gauge("stowage_accounts_storing", "Accounts with at least one file", [], (g, t) => g.set(t.accounts));
  gauge("stowage_traffic_period_bytes", "Bytes moved in the accounts' current traffic periods (all accounts)", [], (g, t) => g.set(t.trafficPeriodBytes));
  gauge("stowage_quota_events", "Purchases and free grants indexed from the chain, by kind (purchase, grant) and pool", ["kind", "pool"], (g, t) => t.quota.forEach((q) => g.set({ kind: q.kind, pool: q.pool }, q.events)));
  gauge("stowage_quota_event_bytes", "Bytes bought or granted, indexed from the chain, by kind and pool", ["kind", "pool"], (g, t) => t.quota.forEach((q) => g.set({ kind: q.kind, pool: q.pool }, q.bytes)));
  gauge("stowage_s3_access_keys", "S3 access keys that work now (all accounts)", [], (g, t) => g.set(t.s3Keys));
  gauge("stowage_pin_tokens", "Pinning Service API tokens that work now (all accounts)", [], (g, t) => g.set(t.pinTokens));
}

/** The standard process metrics. prom-client's default collectors report event-loop figures that
 * Bun does not provide ("Nan", which the text format does not allow), so these few are read here. */
function processGauges(registers: Registry[]) {
  const started = Math.round(Date.now() / 1000 - process.uptime());
  new Gauge({ name: "process_start_time_seconds", help: "Start time of the process since the Unix epoch, in seconds", registers, collect() { this.set(started); } });
  new Gauge({ name: "process_resident_memory_bytes", help: "Resident memory size in bytes", registers, collect() { this.set(process.memoryUsage.rss()); } });
  new Counter({
    name: "process_cpu_seconds_total",
    help: "User and system CPU time spent, in seconds",
    registers,
    collect() {
      const { user, system } = process.cpuUsage();
      this.reset();
      this.inc((user + system) / 1e6);
    },
  });
}
