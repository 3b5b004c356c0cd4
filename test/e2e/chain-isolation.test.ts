/**
 * D14: the embedded chain is reachable by nobody but the server and the data dir's owner. The
 * compiled server's whole process tree listens on no TCP port but its HTTP and libp2p ones, no
 * port answers JSON-RPC, the public /rpc refuses node control, and another user cannot reach the
 * chain's socket. Proven for both engines: anvil in a private network namespace, and the
 * in-process EVM used where the host allows no namespace.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, readlinkSync, statSync } from "node:fs";
import { join } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createPublicClient, http, parseEther } from "viem";
import { runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { descendants } from "../support/procs.ts";
import { tempDir } from "../support/tmp.ts";

/** TCP ports in LISTEN state in this network namespace, by socket inode. */
function listeningInodes(): Map<string, number> {
  const out = new Map<string, number>();
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    for (const line of readFileSync(file, "utf8").split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f[3] === "0A") out.set(f[9]!, parseInt(f[1]!.split(":")[1]!, 16));
    }
  }
  return out;
}

/** The TCP ports any process of the tree listens on, as seen from this (the host's) namespace. */
function portsOfTree(root: number): Set<number> {
  const listening = listeningInodes();
  const ports = new Set<number>();
  for (const pid of [root, ...descendants(root)]) {
    let fds: string[] = [];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {}
    for (const fd of fds) {
      try {
        const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
        const port = inode && listening.get(inode);
        if (port) ports.add(port);
      } catch {}
    }
  }
  return ports;
}

const IMPERSONATE = (who: string) => JSON.stringify({ jsonrpc: "2.0", id: 1, method: "anvil_impersonateAccount", params: [who] });

/** Whatever the port speaks, an attempt at node control gets no JSON-RPC result. */
async function answersJsonRpc(port: number, who: string): Promise<boolean> {
  for (const path of ["/", "/rpc"]) {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: IMPERSONATE(who), signal: AbortSignal.timeout(3000) }).catch(() => undefined);
    const body = res ? await res.text().catch(() => "") : "";
    if (/"result"\s*:/.test(body)) return true;
  }
  return false;
}

/** Connects to the chain's socket as the unprivileged `nobody` user, as another local process would. */
function connectAsNobody(socket: string): { code: number | null; stderr: string } {
  const probe = `import socket,sys
s=socket.socket(socket.AF_UNIX)
try:
  s.connect(sys.argv[1])
except OSError as e:
  print(e.strerror, file=sys.stderr); sys.exit(3)
s.send(b'${IMPERSONATE("0x0000000000000000000000000000000000000001")}\\n')
print(s.recv(4096).decode())`;
  const r = Bun.spawnSync(["runuser", "-u", "nobody", "--", "python3", "-c", probe, socket], { stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode, stderr: r.stderr.toString() };
}

const servers: RunningBinary[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop("SIGKILL").catch(() => {});
});

describe.each([
  ["anvil", { STOWAGE_EMBEDDED_CHAIN: "anvil" }],
  ["the in-process EVM", { STOWAGE_EMBEDDED_CHAIN: "evm" }],
])("embedded chain on %s", (_name, env) => {
  test("no TCP port of the server's tree answers JSON-RPC; /rpc refuses node control; another user cannot reach the socket; the owner's CLI can", async () => {
    const dataDir = join(tempDir("isolation"), "data");
    const server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir], env);
    servers.push(server);
    const httpPort = Number(new URL(server.url).port);
    const libp2pPorts = [...server.output().matchAll(/\/tcp\/(\d+)\/p2p\//g)].map((m) => Number(m[1]));
    expect(libp2pPorts.length).toBeGreaterThan(0);

    const ports = portsOfTree(server.proc.pid);
    expect([...ports].sort()).toEqual([...new Set([httpPort, ...libp2pPorts])].sort());
    const owner = privateKeyToAccount(generatePrivateKey()).address;
    for (const port of ports) expect(await answersJsonRpc(port, owner)).toBe(false);

    // The public filter answers reads and refuses node control, alone or in a batch.
    const rpc = await (await fetch(`${server.url}/rpc`, { method: "POST", headers: { "content-type": "application/json" }, body: `[${IMPERSONATE(owner)},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]` })).json();
    expect(rpc).toEqual([
      { jsonrpc: "2.0", id: 1, error: { code: -32601, message: "Method not allowed: anvil_impersonateAccount" } },
      { jsonrpc: "2.0", id: 2, result: "0x3d9" },
    ]);

    // The socket is inside the private data dir: another user is refused before it can speak.
    const socket = join(dataDir, "chain", "rpc.ipc");
    expect(statSync(socket).isSocket()).toBe(true);
    expect(statSync(dataDir).mode & 0o077).toBe(0);
    expect(statSync(join(dataDir, "chain")).mode & 0o077).toBe(0);
    if (process.getuid?.() === 0) {
      const nobody = connectAsNobody(socket);
      expect(nobody.code).toBe(3);
      expect(nobody.stderr).toContain("Permission denied");
    }

    // The data dir's owner (the operator) still reaches it: the admin CLI goes through the socket.
    const user = privateKeyToAccount(generatePrivateKey()).address;
    const fund = await runBinary(["admin", "fund", user, "2", "--data-dir", dataDir]);
    expect(fund.code).toBe(0);
    expect(await createPublicClient({ transport: http(`${server.url}/rpc`) }).getBalance({ address: user })).toBe(parseEther("2"));
    expect(await server.stop()).toBe(0);
  }, 60_000);
});
