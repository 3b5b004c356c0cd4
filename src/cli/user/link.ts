/**
 * `stowage link CID`: a URL anyone can open (a browser, curl) to read one file once, on the
 * user's traffic, until it expires — what other services call an access link. It is a voucher for
 * that one file in the URL (D22), signed here with the user's key: the gateway stores nothing for
 * it, and refuses it once it was used or expired. Thin over the SDK's `link`.
 */
import { ConfigError } from "../../config.ts";
import { canonicalCid } from "../../cid/canonical.ts";
import { backendOf, expectPositionals, formatBytes, formatTime, json, loggedIn, parseExpiry, userAccount, type Invocation, type Io } from "./common.ts";
import { locate, sizeOf } from "./transfer.ts";

/** How long a link lives unless told: long enough to pass it on, short enough to forget safely. */
export const DEFAULT_LINK_LIFE = "24h";

export async function link(inv: Invocation, io: Io): Promise<number> {
  const [cid] = expectPositionals(inv, ["CID"]) as [string];
  try {
    canonicalCid(cid);
  } catch {
    throw new ConfigError(`CID must be a file's Cid, as \`stowage put\` and \`stowage ls\` show it (got ${JSON.stringify(cid)})`);
  }
  const named = inv.flags.has("--from") ? backendOf(inv, "--from") : undefined;
  const expires = parseExpiry(inv.flags.get("--expires") ?? DEFAULT_LINK_LIFE, Math.floor(Date.now() / 1000));
  const store = await loggedIn(inv, userAccount(inv));
  // Where it is read from, and its size (what the voucher covers): a HEAD, which spends nothing.
  const found = named === undefined ? await locate(inv, store, cid) : { kind: named, size: await sizeOf(store, named, cid) };
  const made = await store.link(found.kind, cid, { expires, bytes: found.size });
  if (inv.flags.has("--json")) {
    io.out(json({ url: made.url, cid: made.cid, backend: made.kind, bytes: made.bytes, expires: made.expires, payer: made.payer }));
    return 0;
  }
  io.out(made.url);
  const until = made.expires ? `until ${formatTime(new Date(made.expires * 1000))}` : "with no expiry";
  io.log(`anyone with this URL can read ${made.cid} (${formatBytes(made.bytes)}, from ${made.kind}) once, ${until}, on your traffic: share it as a secret`);
  return 0;
}
