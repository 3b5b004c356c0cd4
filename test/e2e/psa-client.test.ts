/**
 * The Pinning Service API as the IPFS ecosystem's own client sees it: the npm
 * `@ipfs-shipyard/pinning-service-client` (generated from the spec's OpenAPI document) adds, lists,
 * replaces and removes pins against the compiled binary, with a token from `stowage keys create
 * --scope pins --json` and the content served by a second Helia node over TCP, named as the
 * pins' origin. The pinned content is then a file `stowage ls` lists and `stowage get` returns.
 */
import { afterAll, expect, test } from "bun:test";
import { Configuration, RemotePinningServiceClient, Status, TextMatchingStrategy } from "@ipfs-shipyard/pinning-service-client";
import { CID } from "multiformats/cid";
import { statSync } from "node:fs";
import { multiaddr } from "@multiformats/multiaddr";
import { join } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";
import { until } from "../support/until.ts";
import { originNode, randomBytes, sha256 } from "../psa/support.ts";

const dir = tempDir("e2e-psa");
const dataDir = join(dir, "data");
let server: RunningBinary | undefined;
let restarted: RunningBinary | undefined;
afterAll(async () => {
  await server?.stop();
  await restarted?.stop();
});

test("the pinning service client adds, lists, replaces and removes pins; the pinned file downloads", async () => {
  // Origins on 127.0.0.1 are dialled only when the operator says so (they are the gateway's own network).
  server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir, "--ipfs-listen", "/ip4/127.0.0.1/tcp/0"], { STOWAGE_PIN_ORIGINS: "any" });
  const url = server.url;
  const key = generatePrivateKey();
  const address = privateKeyToAccount(key).address;
  const user = (...args: string[]) => runBinary([...args, "--gateway", url], { STOWAGE_USER_KEY: key });
  for (const [flag, bytes] of [["--space", "64MB"], ["--traffic", "256MB"]] as const) {
    const g = await runBinary(["admin", "grant", "--did", address, flag, bytes, "--data-dir", dataDir]);
    expect(g.code, g.stderr).toBe(0);
  }
  const minted = await user("keys", "create", "--scope", "pins", "--json");
  expect(minted.code, minted.stderr).toBe(0);
  const { token, scope } = JSON.parse(minted.stdout) as { token: string; scope: string };
  expect(scope).toBe("pins");

  const origin = await originNode();
  const bytes = randomBytes(3 * 1024 * 1024 + 7);
  const cid = await origin.add(bytes);
  const client = new RemotePinningServiceClient(new Configuration({ endpointUrl: `${url}/psa`, accessToken: token }));

  // Add: queued at once, with the gateway's own addresses as delegates.
  const added = await client.pinsPost({ pin: { cid, name: "movie.bin", origins: origin.addrs(), meta: { source: "e2e" } } });
  expect(added.status).toBe(Status.Queued);
  expect(added.pin).toMatchObject({ cid, name: "movie.bin" });
  expect(added.delegates.length).toBeGreaterThan(0);
  const pinned = await until("pinned", () => client.pinsRequestidGet({ requestid: added.requestid }), (s) => s.status === Status.Pinned || s.status === Status.Failed, 30_000, 100);
  expect(pinned.status).toBe(Status.Pinned);
  expect(pinned.created).toBeInstanceOf(Date);

  // List: the default (pinned), by cid, by name, by meta.
  const listed = await client.pinsGet({});
  expect(listed.count).toBe(1);
  expect([...listed.results].map((r) => r.requestid)).toEqual([added.requestid]);
  expect((await client.pinsGet({ cid: [cid] })).count).toBe(1);
  expect((await client.pinsGet({ name: "MOVIE", match: TextMatchingStrategy.Ipartial })).count).toBe(1);
  expect((await client.pinsGet({ meta: { source: "e2e" } })).count).toBe(1);
  expect((await client.pinsGet({ status: [Status.Failed] })).count).toBe(0);
  expect((await client.pinsGet({ status: [Status.Queued, Status.Pinning, Status.Pinned, Status.Failed], limit: 5 })).count).toBe(1);

  // The pinned content is a file of the account's ipfs files: listed, and downloaded whole.
  const ls = await user("ls", "--from", "ipfs", "--json");
  expect(ls.code, ls.stderr).toBe(0);
  const v1 = CID.parse(cid).toV1().toString();
  expect(JSON.parse(ls.stdout)).toContainEqual(expect.objectContaining({ Name: "movie.bin", Cid: v1, Size: bytes.byteLength }));
  const out = join(dir, "movie.out");
  const got = await user("get", v1, "--from", "ipfs", "--out", out);
  expect(got.code, got.stderr).toBe(0);
  expect(sha256(new Uint8Array(await Bun.file(out).arrayBuffer()))).toBe(sha256(bytes));

  // Replace: a new request for other content; the old one is gone.
  const other = await origin.add(randomBytes(200_000));
  const replaced = await client.pinsRequestidPost({ requestid: added.requestid, pin: { cid: other, name: "other.bin", origins: origin.addrs() } });
  expect(replaced.requestid).not.toBe(added.requestid);
  const second = await until("replacement pinned", () => client.pinsRequestidGet({ requestid: replaced.requestid }), (s) => s.status === Status.Pinned || s.status === Status.Failed, 30_000, 100);
  expect(second.status).toBe(Status.Pinned);
  // The generated client throws the Response of a failure.
  const gone = await client.pinsRequestidGet({ requestid: added.requestid }).catch((e: unknown) => e);
  expect(gone).toBeInstanceOf(Response);
  expect((gone as Response).status).toBe(404);
  expect(await (gone as Response).json()).toMatchObject({ error: { reason: "NOT_FOUND" } });

  // Remove.
  await client.pinsRequestidDelete({ requestid: replaced.requestid });
  expect((await client.pinsGet({})).count).toBe(0);

  // Content the operator blocks is refused when it is asked for: 410, in the spec's shape.
  const banned = await origin.add(randomBytes(1000));
  const block = await runBinary(["admin", "block", banned, "--reason", "test", "--data-dir", dataDir]);
  expect(block.code, block.stderr).toBe(0);
  const blocked = await until("blocked", () => client.pinsPost({ pin: { cid: banned, origins: origin.addrs() } }).catch((e: unknown) => e), (r) => r instanceof Response, 10_000, 100);
  expect((blocked as Response).status).toBe(410);
  expect(await (blocked as Response).json()).toMatchObject({ error: { reason: "CONTENT_BLOCKED" } });

  // A token that is not one: the spec's 401.
  const stranger = new RemotePinningServiceClient(new Configuration({ endpointUrl: `${url}/psa`, accessToken: "STWAAAAAAAAAAAAAAAAA.nope" }));
  const refused = await stranger.pinsGet({}).catch((e: unknown) => e);
  expect((refused as Response).status).toBe(401);
}, 120_000);

test("a pin in flight when the gateway is killed is taken up again by its next start", async () => {
  const data = join(dir, "restart");
  const args = ["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", data, "--ipfs-listen", "/ip4/127.0.0.1/tcp/0"];
  const first = await startBinary(args);
  const key = generatePrivateKey();
  const address = privateKeyToAccount(key).address;
  const grantedAt = Date.now();
  for (const [flag, bytes] of [["--space", "16MB"], ["--traffic", "64MB"]] as const) expect((await runBinary(["admin", "grant", "--did", address, flag, bytes, "--data-dir", data])).code).toBe(0);
  const minted = await runBinary(["keys", "create", "--scope", "pins", "--json", "--gateway", first.url], { STOWAGE_USER_KEY: key });
  const { token } = JSON.parse(minted.stdout) as { token: string };

  // The content is on a node the gateway does not know of: the pin waits in `pinning`.
  const holder = await originNode();
  const bytes = randomBytes(700_000);
  const cid = await holder.add(bytes);
  const before = new RemotePinningServiceClient(new Configuration({ endpointUrl: `${first.url}/psa`, accessToken: token }));
  const added = await before.pinsPost({ pin: { cid, name: "late.bin" } });
  await until("pinning", () => before.pinsRequestidGet({ requestid: added.requestid }), (s) => s.status === Status.Pinning, 10_000, 50);
  // The embedded chain writes its state every second: the grants are in it before the kill.
  const state = join(data, "chain", "state.json");
  await until("chain state saved", () => statSync(state).mtimeMs, (t) => t > grantedAt, 10_000, 50);
  expect(await first.stop("SIGKILL")).not.toBe(0);

  restarted = await startBinary(args);
  const after = new RemotePinningServiceClient(new Configuration({ endpointUrl: `${restarted.url}/psa`, accessToken: token }));
  const status = await after.pinsRequestidGet({ requestid: added.requestid });
  expect(status.status).toBe(Status.Pinning);
  // The holder now connects to the gateway's delegates, as a client's node does after adding a pin.
  await holder.node.helia.libp2p.dial(status.delegates.map((d) => multiaddr(d)));
  const done = await until("pinned after the restart", () => after.pinsRequestidGet({ requestid: added.requestid }), (s) => s.status === Status.Pinned || s.status === Status.Failed, 30_000, 100);
  expect(done.status).toBe(Status.Pinned);
  const ls = await runBinary(["ls", "--from", "ipfs", "--json", "--gateway", restarted.url], { STOWAGE_USER_KEY: key });
  expect(JSON.parse(ls.stdout)).toContainEqual(expect.objectContaining({ Name: "late.bin", Cid: CID.parse(cid).toV1().toString(), Size: bytes.byteLength }));
}, 120_000);
