/**
 * `stowage keys create|list|revoke`: S3 access keys (D18) for aws-cli, rclone and other S3 tools,
 * and Pinning Service API tokens (`--scope pins`) for `ipfs pin remote`.
 * Thin over the keys SDK: each run logs in (the mint is a signed restricted call of that session)
 * and prints. A new key's secret is printed once, as the gateway shows it once.
 */
import { ConfigError } from "../../config.ts";
import { keysClient, type ListedKey, type MintedKey } from "../../sdk/keys.ts";
import { formatTime, json, loggedIn, parseExpiry, table, userAccount, type Invocation, type Io } from "./common.ts";

const SCOPES = ["s3", "pins"] as const;
const ACCESS = ["rw", "ro"] as const;
const BUCKETS = ["dfs", "ipfs", "*"] as const;

function choice<T extends string>(inv: Invocation, flag: string, choices: readonly T[], fallback: T): T {
  const v = inv.flags.get(flag) ?? fallback;
  if (!(choices as readonly string[]).includes(v)) throw new ConfigError(`${flag} must be ${choices.join(", ")} (got ${JSON.stringify(v)})`);
  return v as T;
}

/** The gateway's one `scope` (rw, ro, pins) as the command's two flags say it: --scope, --access. */
const scopeAndAccess = (scope: ListedKey["scope"]): [string, string] => (scope === "pins" ? ["pins", "-"] : ["s3", scope]);

const expiryText = (at: number | null) => (at === null ? "never" : formatTime(new Date(at * 1000)));

async function client(inv: Invocation) {
  const store = await loggedIn(inv, userAccount(inv));
  return keysClient({ baseUrl: inv.gateway, store });
}

export async function keys(inv: Invocation, io: Io): Promise<number> {
  const [sub, ...rest] = inv.positionals;
  const expect = (n: number, names: string) => {
    if (rest.length !== n) throw new ConfigError(n ? `keys ${sub} needs ${names}` : `unexpected argument ${JSON.stringify(rest[0])}`);
  };
  const asJson = inv.flags.has("--json");
  switch (sub) {
    case "create": {
      expect(0, "");
      const scope = choice(inv, "--scope", SCOPES, "s3");
      if (scope === "pins" && (inv.flags.has("--access") || inv.flags.has("--bucket"))) throw new ConfigError("--access and --bucket are for S3 keys: a pins token acts on ipfs");
      const access = choice(inv, "--access", ACCESS, "rw");
      const bucket = choice(inv, "--bucket", BUCKETS, "*");
      const expiresAt = parseExpiry(inv.flags.get("--expires"), Math.floor(Date.now() / 1000));
      const key: MintedKey = await (await client(inv)).create({ scope, access, bucket, expiresAt });
      if (asJson) {
        io.out(json(key));
        return 0;
      }
      if (key.token !== undefined) {
        io.out(`token    ${key.token}`);
        io.out(`scope    pins on ipfs, expires ${expiryText(key.expiresAt)}`);
        io.log("the token is shown this once: `ipfs pin remote service add stowage <gateway>/psa <token>` (`stowage keys revoke ID` ends it)");
        return 0;
      }
      io.out(`access key id      ${key.accessKeyId}`);
      io.out(`secret access key  ${key.secretAccessKey}`);
      io.out(`scope              s3, ${key.scope} on ${key.bucket === "*" ? "dfs and ipfs" : key.bucket}, expires ${expiryText(key.expiresAt)}`);
      io.log("the secret is shown this once: keep it now (`stowage keys revoke ID` ends the key)");
      return 0;
    }
    case "list": {
      expect(0, "");
      const listed: ListedKey[] = await (await client(inv)).list();
      if (asJson) {
        io.out(json(listed));
        return 0;
      }
      if (!listed.length) {
        io.log("no access keys");
        return 0;
      }
      // Headed as `create`'s flags are: SCOPE as --scope (s3, pins), ACCESS as --access (rw, ro).
      const rows = listed.map((k) => [k.accessKeyId, ...scopeAndAccess(k.scope), k.bucket, expiryText(k.expiresAt), formatTime(new Date(k.createdAt * 1000)), k.signer]);
      for (const line of table(["ACCESS KEY ID", "SCOPE", "ACCESS", "BUCKET", "EXPIRES", "CREATED", "SIGNER"], rows)) io.out(line);
      return 0;
    }
    case "revoke": {
      expect(1, "the ID of a key (its access key id, as `stowage keys list` shows it)");
      const id = rest[0] as string;
      await (await client(inv)).revoke(id);
      if (asJson) io.out(json({ revoked: id }));
      else io.out(`revoked ${id}`);
      return 0;
    }
    case undefined:
      throw new ConfigError("keys needs create, list or revoke");
    default:
      throw new ConfigError(`keys has no ${JSON.stringify(sub)}: use create, list or revoke`);
  }
}
