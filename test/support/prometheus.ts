/**
 * A Prometheus text-format parser that is not ours: the Prometheus project's Python client
 * (Debian's python3-prometheus-client, `text_string_to_metric_families`), installed when missing
 * (`scripts/prometheus-parser.sh install`). It rejects what a Prometheus server would not scrape,
 * so the test reads the exposition the way a scraper does.
 */
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");

export interface PromSample {
  /** The series name: a histogram's are `<name>_bucket`, `<name>_sum` and `<name>_count`. */
  name: string;
  labels: Record<string, string>;
  value: number;
}
export interface PromFamily {
  name: string;
  type: string;
  samples: PromSample[];
}

const PARSE = `
import json, math, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for f in text_string_to_metric_families(sys.stdin.read()):
    out.append({"name": f.name, "type": f.type, "samples": [{"name": s.name, "labels": s.labels, "value": s.value if math.isfinite(s.value) else str(s.value)} for s in f.samples]})
print(json.dumps(out))
`;

async function ensureParser(): Promise<void> {
  if (Bun.spawnSync(["/usr/bin/python3", "-c", "import prometheus_client.parser"]).exitCode === 0) return;
  const proc = Bun.spawn(["sh", join(ROOT, "scripts", "prometheus-parser.sh"), "install"], { stdout: "inherit", stderr: "inherit" });
  if ((await proc.exited) !== 0) throw new Error("installing python3-prometheus-client failed (scripts/prometheus-parser.sh install): see the output above");
}

/** The families of a text exposition, by name; throws with the parser's message on a malformed one. */
export async function parsePrometheus(text: string): Promise<Map<string, PromFamily>> {
  await ensureParser();
  const proc = Bun.spawn(["/usr/bin/python3", "-c", PARSE], { stdin: new Blob([text]), stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`the Prometheus parser refused the exposition: ${err.trim().split("\n").pop()}`);
  return new Map((JSON.parse(out) as PromFamily[]).map((f) => [f.name, f]));
}
