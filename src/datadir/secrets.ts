/**
 * Secrets live in `DATA_DIR/secrets/` (folder 0700, files 0600), generated on first start.
 * There is no fallback key: a secret is either configured, read from its file, or made fresh.
 * A folder or file that others can read stops the start, since its keys may already be known.
 *
 * @example
 *   const secrets = loadSecrets("data", config)  // creates data/secrets on first start
 */
import { closeSync, mkdirSync, openSync, readFileSync, statSync, writeSync } from "node:fs";
import { join } from "node:path";
import { generatePrivateKey } from "viem/accounts";
import type { Config } from "../config.ts";

export class InsecureSecrets extends Error {
  override name = "InsecureSecrets";
}

export interface Secrets {
  /** HMAC key of the account API's JWTs. */
  jwtKey: Uint8Array;
  /** Encrypts secrets kept in the database, such as S3 access-key secrets (D18). */
  secretsKey: Uint8Array;
  /** The gateway's chain key: sends purchases, signs nothing of users'. */
  operatorKey: `0x${string}`;
  /** The owner key of the contracts, used by the command line. */
  adminKey: `0x${string}`;
  /** The X25519 secret of the gateway's age identity (D20), unless STOWAGE_AGE_IDENTITY sets it. */
  ageKey?: Uint8Array;
}

type Hex = `0x${string}`;
const hex32 = (): Hex => `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex")}`;

const files = {
  jwt: { name: "jwt.key", make: hex32 },
  secrets: { name: "secrets.key", make: hex32 },
  operator: { name: "operator.key", make: generatePrivateKey },
  admin: { name: "admin.key", make: generatePrivateKey },
  /** An X25519 secret key, kept as hex like the others (AGE-SECRET-KEY-1… is its bech32 form). */
  age: { name: "age.key", make: hex32 },
} as const;

export function secretsDir(dataDir: string) {
  return join(dataDir, "secrets");
}

function checkPrivate(path: string) {
  const mode = statSync(path).mode & 0o777;
  if (mode & 0o077) {
    throw new InsecureSecrets(`${path} is readable by others (mode ${mode.toString(8)}); run chmod go-rwx on it and its files, or start over with fresh secrets`);
  }
}

/** Reads a secret file, or creates it exclusively (two processes starting at once agree). */
function readOrCreate(dir: string, file: { name: string; make: () => Hex }): Hex {
  const path = join(dir, file.name);
  try {
    const fd = openSync(path, "wx", 0o600);
    writeSync(fd, `${file.make()}\n`);
    closeSync(fd);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
  checkPrivate(path);
  const value = readFileSync(path, "utf8").trim();
  if (!/^0x[0-9a-f]{64}$/i.test(value)) throw new InsecureSecrets(`${path} does not hold a 32-byte hex secret`);
  return value as Hex;
}

export function loadSecrets(dataDir: string, config: Pick<Config, "operatorKey" | "adminKey"> & Partial<Pick<Config, "jwtKey" | "secretsKey" | "ageIdentity">>): Secrets {
  const dir = secretsDir(dataDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  checkPrivate(dir);
  return {
    // Configured when many gateways must accept each other's tokens (D16).
    jwtKey: Buffer.from((config.jwtKey ?? readOrCreate(dir, files.jwt)).slice(2), "hex"),
    // Configured for the same reason: a key minted at one gateway is checked at another.
    secretsKey: Buffer.from((config.secretsKey ?? readOrCreate(dir, files.secrets)).slice(2), "hex"),
    operatorKey: config.operatorKey ?? readOrCreate(dir, files.operator),
    adminKey: config.adminKey ?? readOrCreate(dir, files.admin),
    // Configured when many gateways must all open the escrows one of them verified (D16).
    ...(config.ageIdentity ? {} : { ageKey: Buffer.from(readOrCreate(dir, files.age).slice(2), "hex") }),
  };
}

/** Reads an existing chain key for the command line; never creates one. */
export function readChainKey(dataDir: string, which: "admin" | "operator"): `0x${string}` {
  const path = join(secretsDir(dataDir), files[which].name);
  try {
    checkPrivate(secretsDir(dataDir));
    checkPrivate(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      throw new InsecureSecrets(`no ${which} key at ${path}: start \`stowage serve\` once with this data dir, or set STOWAGE_${which.toUpperCase()}_KEY`);
    }
    throw err;
  }
  return readOrCreate(secretsDir(dataDir), files[which]);
}
