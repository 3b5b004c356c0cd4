/**
 * The processes and ports of the servers tests start (Ceph, PostgreSQL, the binary), found the
 * way `ps` would: by reading /proc. One copy here, not one per server's support file.
 */
import { readdirSync, readFileSync } from "node:fs";

/** Every process under `root` now (children, their children, …), not `root` itself. */
export function descendants(root: number): number[] {
  const parent = new Map<number, number>();
  for (const p of readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      // Field 4 of stat is the parent pid; the name (field 2) is in parentheses and may hold spaces.
      const stat = readFileSync(`/proc/${p}/stat`, "utf8");
      parent.set(Number(p), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // gone meanwhile
    }
  }
  const found: number[] = [];
  const walk = (pid: number) => {
    for (const [child, ppid] of parent) {
      if (ppid === pid) {
        found.push(child);
        walk(child);
      }
    }
  };
  walk(root);
  return found;
}

/** Resident memory of `pid` now, in bytes (0 once it is gone). */
export function rssOf(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** True while `pid` runs: not gone, and not a zombie no parent has reaped (a detached daemon's
 * parent is whatever reaps orphans here, maybe nothing). */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat[stat.lastIndexOf(")") + 2] !== "Z";
  } catch {
    return false;
  }
}

/** A loopback port free a moment ago (the OS picks it; the caller binds it soon after). */
export function freePort(): number {
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = probe.port;
  probe.stop(true);
  return port;
}

/** Runs `cmd` to completion and returns its stdout; a non-zero exit throws with its stderr. */
export async function run(cmd: string[], what: string): Promise<string> {
  const proc = Bun.spawn(cmd, { stdout: "pipe", stderr: "pipe" });
  const [code, out, err] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  if (code !== 0) throw new Error(`${what} failed (${code}): ${err.trim() || out.trim()}`);
  return out;
}
